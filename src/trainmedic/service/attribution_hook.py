"""Runs the external attribution hook (``[attribution_hook]``) without ever holding up recovery.

The hook is called in a worker thread; the caller waits at most ``timeout_s`` for its answer.
A command gets the evidence JSON on stdin and is killed at the timeout; an HTTP endpoint gets
it as a POST with the same timeout on the connection. Whatever happens (no answer in time,
a non-zero exit, a refused connection, an answer that is not a verdict), the outcome is a
value and our verdict stands; the pure rules of what an answer changes are in
``trainmedic.core.attribute.hook``.
"""

from __future__ import annotations

import json
import logging
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Literal

from trainmedic.core.attribute.hook import (
    MAX_ANSWER_BYTES,
    HookConfig,
    HookOutcome,
    combine,
    hook_payload,
    parse_answer,
)
from trainmedic.core.errors import InputError
from trainmedic.core.model import Event, Verdict

log = logging.getLogger(__name__)

GRACE_S = 0.5
"""Extra wait for the worker to report its own timeout (it kills the command first)."""


class AttributionHook:
    """One configured hook; ``review`` is safe to call from the service loop."""

    def __init__(self, config: HookConfig) -> None:
        self.config = config
        # Two workers: a hung call (a command that ignores its kill) cannot block the next.
        self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="attribution-hook")

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    def consult(self, payload: dict[str, object]) -> HookOutcome:
        """The hook's answer to ``payload``, waiting at most ``timeout_s`` (plus a grace)."""
        start = time.monotonic()
        body = json.dumps(payload).encode()
        future = self._pool.submit(self._call, body)
        try:
            return future.result(timeout=self.config.timeout_s + GRACE_S)
        except FutureTimeout:
            return HookOutcome("timeout", detail="no answer", elapsed_s=time.monotonic() - start)

    def review(
        self, job_id: str, attempt: int, verdict: Verdict, events: Sequence[Event]
    ) -> Verdict:
        """Our verdict with the hook's answer recorded (and applied where the config allows)."""
        outcome = self.consult(hook_payload(job_id, attempt, verdict, events))
        if outcome.status != "answered":
            log.warning(
                "attribution hook for job %s: %s (%s)", job_id, outcome.status, outcome.detail
            )
        return combine(verdict, outcome, self.config.override)

    def _call(self, body: bytes) -> HookOutcome:
        start = time.monotonic()

        def outcome(status: Literal["timeout", "error"], detail: str) -> HookOutcome:
            return HookOutcome(status, detail=detail[:300], elapsed_s=time.monotonic() - start)

        try:
            raw = self._run(body) if self.config.command else self._post(body)
            verdict = parse_answer(raw)
        except subprocess.TimeoutExpired:
            return outcome("timeout", "command killed")
        except TimeoutError:
            return outcome("timeout", "no response")
        except urllib.error.URLError as exc:
            return outcome("timeout" if isinstance(exc.reason, TimeoutError) else "error", str(exc))
        except (InputError, OSError, ValueError) as exc:
            return outcome("error", str(exc))
        return HookOutcome("answered", verdict, elapsed_s=time.monotonic() - start)

    def _run(self, body: bytes) -> bytes:
        proc = subprocess.Popen(
            list(self.config.command),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            out, err = proc.communicate(body, timeout=self.config.timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise
        if proc.returncode != 0:
            tail = err.decode("utf-8", "replace").strip().splitlines()[-1:] or [""]
            raise InputError(f"exit status {proc.returncode}: {tail[0][:200]}")
        return out

    def _post(self, body: bytes) -> bytes:
        request = urllib.request.Request(
            self.config.url,
            data=body,
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=self.config.timeout_s) as response:
            data: bytes = response.read(MAX_ANSWER_BYTES + 1)
            return data
