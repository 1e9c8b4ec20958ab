"""An external attribution hook: a second opinion, recorded beside ours (pure parts).

As NVIDIA Recovery and NVRx allow, a site may plug its own attribution in: a command that
reads the job's evidence as JSON on stdin, or an HTTP endpoint that receives it as a POST, and
answers with a verdict (JSON) within a timeout. This module holds what needs no I/O: the
configuration (``[attribution_hook]``), the evidence sent, the answer's parsing, and how the
answer combines with our verdict. ``trainmedic.service.attribution_hook`` runs it.

Combining: the hook's answer is always recorded in the verdict's basis. It *replaces* ours only
when our category is one the config lists in ``override`` (e.g. ``["unknown"]``: let the site's
tool name what we could not). A hook that fails, times out or answers nonsense changes nothing
but a note in the basis: recovery proceeds with our verdict.

The answer::

    {"category": "gpu_hardware", "kind": "crash", "confidence": 0.7, "basis": "..."}

(``kind``, ``confidence`` and ``basis`` optional; ``category`` one of the eight categories).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from trainmedic.core.errors import InputError
from trainmedic.core.model import Category, Event, Kind, Verdict

MAX_EVENTS = 200
MAX_TEXT = 500
MAX_ANSWER_BYTES = 1 << 20
HOOK_CONFIDENCE_CAP = 0.9
"""An outside answer never claims more than this (it never drains a node by itself either:
it replaces the category, not the evidence the policy checks for a drain)."""


@dataclass(frozen=True, slots=True)
class HookConfig:
    """``[attribution_hook]``: an external attribution command or HTTP endpoint (optional)."""

    command: tuple[str, ...] = ()
    """The command and its arguments (no shell): it reads the evidence JSON on stdin and
    writes a verdict JSON on stdout, exiting 0."""
    url: str = ""
    """An ``http://`` or ``https://`` endpoint: the evidence is POSTed as JSON, the response
    body is the verdict JSON."""
    timeout_s: float = 2.0
    """How long recovery waits for the answer; past it, it proceeds with our verdict."""
    override: frozenset[Category] = frozenset()
    """Our verdict's categories the hook's answer may replace (e.g. ``["unknown"]``). Empty:
    the answer is only recorded."""

    def __post_init__(self) -> None:
        if self.command and self.url:
            raise ValueError("attribution_hook: set command or url, not both")
        if self.url and not self.url.startswith(("http://", "https://")):
            raise ValueError(f"attribution_hook.url must be http(s)://, got {self.url!r}")
        if not 0 < self.timeout_s <= 60:
            raise ValueError(f"attribution_hook.timeout_s must be in (0, 60], got {self.timeout_s}")

    @property
    def enabled(self) -> bool:
        return bool(self.command or self.url)


@dataclass(frozen=True, slots=True)
class HookVerdict:
    category: Category
    kind: Kind
    confidence: float
    basis: str


@dataclass(frozen=True, slots=True)
class HookOutcome:
    status: Literal["answered", "timeout", "error"]
    verdict: HookVerdict | None = None
    detail: str = ""
    elapsed_s: float = 0.0


def _event(e: Event) -> dict[str, Any]:
    out: dict[str, Any] = {
        "signature": e.signature,
        "category": e.category.value,
        "role": e.role.value,
        "line": e.line,
        "source": e.source,
        "evidence": e.evidence.value,
        "text": e.text[:MAX_TEXT],
    }
    for key in ("rank", "node", "gpu", "xid", "timestamp"):
        value = getattr(e, key)
        if value is not None:
            out[key] = value
    return out


def hook_payload(
    job_id: str, attempt: int, verdict: Verdict, events: Sequence[Event]
) -> dict[str, Any]:
    """The evidence sent to the hook: our verdict and the job's matched events (bounded)."""
    return {
        "job_id": job_id,
        "attempt": attempt,
        "verdict": {
            "failure": verdict.failure,
            "category": verdict.category.value,
            "kind": verdict.kind.value,
            "confidence": round(verdict.confidence, 3),
            "basis": verdict.basis,
            "root_cause": _event(verdict.root_cause) if verdict.root_cause else None,
            "implicated": {
                "nodes": list(verdict.implicated.nodes),
                "ranks": list(verdict.implicated.ranks),
                "gpus": list(verdict.implicated.gpus),
            },
        },
        "events": [_event(e) for e in list(events)[-MAX_EVENTS:]],
    }


def parse_answer(raw: bytes | str) -> HookVerdict:
    """The hook's verdict; ``InputError`` (one line) when it is not one."""
    if len(raw) > MAX_ANSWER_BYTES:
        raise InputError(f"answer larger than {MAX_ANSWER_BYTES} bytes")
    try:
        obj = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise InputError(f"answer is not JSON: {exc}") from exc
    if not isinstance(obj, dict):
        raise InputError("answer is not a JSON object")
    try:
        category = Category(str(obj["category"]))
        kind = Kind(str(obj.get("kind", "crash")))
        confidence = float(obj.get("confidence", 0.5))
    except KeyError as exc:
        raise InputError("answer has no 'category'") from exc
    except (ValueError, TypeError) as exc:
        raise InputError(f"bad answer: {exc}") from exc
    if not 0.0 <= confidence <= 1.0:
        raise InputError(f"bad answer: confidence {confidence} outside [0, 1]")
    return HookVerdict(category, kind, confidence, str(obj.get("basis", ""))[:MAX_TEXT])


def combine(ours: Verdict, outcome: HookOutcome, override: frozenset[Category]) -> Verdict:
    """Our verdict with the hook's answer recorded, replaced by it only where allowed."""
    if outcome.status != "answered" or outcome.verdict is None:
        return replace(
            ours,
            basis=f"{ours.basis}; external hook {outcome.status} after "
            f"{outcome.elapsed_s:.1f} s ({outcome.detail[:200]}): our verdict stands",
        )
    theirs = outcome.verdict
    said = (
        f"external hook: {theirs.kind.value}/{theirs.category.value} "
        f"({theirs.confidence:.2f}){': ' + theirs.basis if theirs.basis else ''}"
    )
    if not ours.failure or ours.category not in override or theirs.category is ours.category:
        return replace(ours, basis=f"{ours.basis}; {said} (recorded, not applied)")
    return replace(
        ours,
        category=theirs.category,
        kind=theirs.kind if theirs.kind is not Kind.NONE else ours.kind,
        confidence=min(theirs.confidence, HOOK_CONFIDENCE_CAP),
        basis=f"{said} (applied: [attribution_hook] override lists {ours.category.value}); "
        f"ours was {ours.kind.value}/{ours.category.value} ({ours.confidence:.2f}): {ours.basis}",
    )
