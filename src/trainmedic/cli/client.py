"""``trainmedic status | incidents | advice``: read the service's HTTP API.

    trainmedic status [JOB_ID]                 watched jobs, or one job with its attempts
    trainmedic incidents [--job JOB_ID]        incidents, oldest first
    trainmedic advice [--job JOB_ID] [--active]

``--url`` defaults to ``$TRAINMEDIC_URL`` or http://127.0.0.1:8377; ``--json`` prints the API's
JSON as is. The API wants a bearer token for reads: ``--token-file FILE`` (first line), else
``$TRAINMEDIC_API_READ_TOKEN``, else ``$TRAINMEDIC_API_TOKEN`` (a token on the command line
would show in ``ps``). Exit status: 0 on success, 1 when the API answers with an error (e.g.
unknown job, bad token), 2 when it cannot be reached or answers something that is not JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

import httpx

DEFAULT_URL = "http://127.0.0.1:8377"
URL_ENV = "TRAINMEDIC_URL"
TOKEN_ENVS = ("TRAINMEDIC_API_READ_TOKEN", "TRAINMEDIC_API_TOKEN")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    command = parser.prog.split()[-1]
    parser.add_argument(
        "--url",
        default=os.environ.get(URL_ENV, DEFAULT_URL),
        help=f"the service's API (default: ${URL_ENV} or {DEFAULT_URL})",
    )
    parser.add_argument("--json", action="store_true", help="print the API's JSON")
    parser.add_argument(
        "--token-file",
        help=f"file holding the API token (default: ${TOKEN_ENVS[0]}, then ${TOKEN_ENVS[1]})",
    )
    parser.add_argument("--timeout", type=float, default=5.0, help="seconds (default 5)")
    if command == "status":
        parser.add_argument("job_id", nargs="?", help="show one job with its attempts")
    else:
        parser.add_argument("--job", dest="job_id", help="only this job")
    if command == "advice":
        parser.add_argument("--active", action="store_true", help="only pending or applying")


class _ApiAnswerError(Exception):
    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def _token(args: argparse.Namespace) -> str:
    if args.token_file:
        try:
            with open(args.token_file, encoding="utf-8") as handle:
                return handle.readline().strip()
        except OSError as error:
            reason = error.strerror or error
            message = f"cannot read --token-file {args.token_file}: {reason}"
            raise _ApiAnswerError(message, 2) from error
    return next((os.environ[name] for name in TOKEN_ENVS if os.environ.get(name)), "")


def _get(args: argparse.Namespace, path: str, params: dict[str, str]) -> Any:
    url = args.url.rstrip("/") + path
    token = _token(args)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        response = httpx.get(url, params=params, headers=headers, timeout=args.timeout)
    except httpx.HTTPError as error:
        reason = str(error) or type(error).__name__
        raise _ApiAnswerError(f"cannot reach the API at {args.url}: {reason}", 2) from error
    try:
        body = response.json()
    except ValueError as error:
        raise _ApiAnswerError(f"{url} answered {response.status_code} without JSON", 2) from error
    if response.is_error:
        detail = body.get("detail", body) if isinstance(body, dict) else body
        if response.status_code in (401, 403) and not token:
            detail = f"{detail} (set ${TOKEN_ENVS[0]} or --token-file)"
        raise _ApiAnswerError(f"{url}: {response.status_code}: {detail}", 1)
    return body


def run(args: argparse.Namespace) -> int:
    command: str = args.command
    job_id: str | None = getattr(args, "job_id", None)
    try:
        if command == "status":
            path = f"/jobs/{job_id}" if job_id else "/jobs"
            body = _get(args, path, {})
        else:
            params = {"job_id": job_id} if job_id else {}
            if command == "advice" and args.active:
                params["active"] = "true"
            body = _get(args, f"/{command}", params)
    except _ApiAnswerError as error:
        print(f"trainmedic {command}: {error}", file=sys.stderr)
        return error.exit_code
    if args.json:
        print(json.dumps(body, indent=2, sort_keys=True))
        return 0
    now = time.time()
    if command == "status" and job_id:
        print(_job_detail(body, now))
    elif command == "status":
        print(_jobs_table(body, now))
    elif command == "incidents":
        print(_incidents_table(body))
    else:
        print(_advice_table(body))
    return 0


def table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Left-aligned columns, two spaces apart; '-' for None."""
    cells = [[("-" if c is None else str(c)) for c in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(header)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip()]
    for row in cells:
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    return "\n".join(lines)


def _ago(then: float | None, now: float) -> str | None:
    return None if then is None else f"{max(0.0, now - then):.0f}s ago"


def _clock(t: float | None) -> str | None:
    return None if t is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))


def _short(text: str, width: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _jobs_table(jobs: list[dict[str, Any]], now: float) -> str:
    if not jobs:
        return "no jobs watched"
    header = ("JOB", "SCHEDULER", "STATE", "ATTEMPT", "ITERATION", "CHECKPOINT", "PROGRESS")
    rows = [
        (
            j["job_id"],
            j["scheduler"],
            j["state"] or "?",
            j["attempt"],
            j["last_iteration"],
            j["last_checkpoint_iteration"],
            _ago(j["last_progress_at"], now),
        )
        for j in jobs
    ]
    return table(header, rows)


def _job_detail(detail: dict[str, Any], now: float) -> str:
    job = detail["job"]
    spec = job["spec"]
    lines = [
        f"job {job['job_id']} ({job['scheduler']}) {job['name']}".rstrip(),
        f"  state {job['state'] or '?'}, attempt {job['attempt']}, iteration "
        f"{job['last_iteration']}, checkpoint {job['last_checkpoint_iteration']}, "
        f"progress {_ago(job['last_progress_at'], now)}",
        f"  registered {_clock(job['registered_at'])}; logs: {', '.join(spec['log_paths']) or '-'}",
    ]
    if detail["attempts"]:
        header = ("ATTEMPT", "STARTED", "ENDED", "END STATE", "NODES", "ITERATIONS")
        rows = [
            (
                a["attempt"],
                _clock(a["started_at"]),
                _clock(a["ended_at"]),
                a["end_state"] or None,
                ",".join(a["nodes"]),
                f"{a['first_iteration']}..{a['last_iteration']}",
            )
            for a in detail["attempts"]
        ]
        lines += ["", table(header, rows)]
    return "\n".join(lines)


def _incidents_table(incidents: list[dict[str, Any]]) -> str:
    if not incidents:
        return "no incidents"
    header = ("ID", "JOB", "ATTEMPT", "DETECTED", "KIND", "CATEGORY", "CONF", "NODES", "ROOT CAUSE")
    rows = []
    for i in incidents:
        root = i["root_cause"]
        cause = f"{root['signature']}: {_short(root['text'])}" if root else _short(i["basis"])
        rows.append(
            (
                i["id"],
                i["job_id"],
                i["attempt"],
                _clock(i["detected_at"]),
                i["kind"],
                i["category"],
                f"{i['confidence']:.2f}",
                ",".join(i["implicated"]["nodes"]),
                cause,
            )
        )
    return table(header, rows)


def _advice_table(advice: list[dict[str, Any]]) -> str:
    if not advice:
        return "no advice"
    header = (
        "ID",
        "JOB",
        "ATTEMPT",
        "GEN",
        "ACTION",
        "EXCLUDE",
        "DRAIN",
        "MODE",
        "STATUS",
        "BASIS",
    )
    rows = [
        (
            a["id"],
            a["job_id"],
            a["attempt"],
            a["generation"],
            a["action"],
            ",".join(a["exclude_nodes"]),
            ",".join(a["drain_nodes"]),
            a["mode"],
            a["status"],
            _short(a["basis"], 50),
        )
        for a in advice
    ]
    return table(header, rows)
