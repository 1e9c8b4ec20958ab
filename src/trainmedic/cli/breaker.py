"""``trainmedic breaker status | reset``: the drain circuit breaker, through the service's API.

    trainmedic breaker status      closed, or tripped (since when, why): drains are advice only
    trainmedic breaker reset       the operator's reset (needs the API's write token)

Once tripped, the breaker stays tripped, across service restarts, until an operator resets it
(``core.policy.breaker``). ``--token`` defaults to ``$TRAINMEDIC_API_TOKEN``. Exit status: 0 on
success, 1 when the API refuses (e.g. a wrong token), 2 when it cannot be reached.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

import httpx

from trainmedic.cli.client import DEFAULT_URL, URL_ENV
from trainmedic.service.config.loader import TOKEN_ENV


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=("status", "reset"))
    parser.add_argument(
        "--url",
        default=os.environ.get(URL_ENV, DEFAULT_URL),
        help=f"the service's API (default: ${URL_ENV} or {DEFAULT_URL})",
    )
    parser.add_argument(
        "--token", default=os.environ.get(TOKEN_ENV, ""), help=f"API token (default: ${TOKEN_ENV})"
    )
    parser.add_argument("--json", action="store_true", help="print the API's JSON")
    parser.add_argument("--timeout", type=float, default=5.0, help="seconds (default 5)")


def _call(args: argparse.Namespace) -> tuple[int, Any]:
    headers = {"Authorization": f"Bearer {args.token}"} if args.token else {}
    base = args.url.rstrip("/")
    try:
        if args.action == "reset":
            answer = httpx.post(f"{base}/breaker/reset", headers=headers, timeout=args.timeout)
        else:
            answer = httpx.get(f"{base}/breaker", headers=headers, timeout=args.timeout)
    except httpx.HTTPError as error:
        return 2, f"cannot reach the API at {args.url}: {error or type(error).__name__}"
    try:
        body = answer.json()
    except ValueError:
        return 2, f"{base} answered {answer.status_code} without JSON"
    if answer.is_error:
        detail = body.get("detail", body) if isinstance(body, dict) else body
        return 1, f"{answer.status_code}: {detail}"
    return 0, body


def describe(body: dict[str, Any]) -> str:
    state = body["state"]
    if state["tripped"]:
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(state["tripped_at"]))
        return (
            f"drain circuit breaker TRIPPED since {since}: {state['reason']}\n"
            "drains are advice only until an operator resets it (trainmedic breaker reset)"
        )
    if body.get("was_tripped"):
        return "drain circuit breaker reset: closed, drains resume (the count starts afresh)"
    if body.get("was_tripped") is False:
        return "drain circuit breaker was not tripped: nothing to reset"
    return "drain circuit breaker closed"


def run(args: argparse.Namespace) -> int:
    code, body = _call(args)
    if code:
        print(f"trainmedic breaker {args.action}: {body}", file=sys.stderr)
        return code
    print(json.dumps(body, indent=2, sort_keys=True) if args.json else describe(body))
    return 0
