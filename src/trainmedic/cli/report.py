"""``trainmedic report JOB | --cluster [--json]``: where the time went, as a terminal table.

Reads the service's API (``GET /jobs/{id}/accounting``, ``GET /cluster/summary``), or, with
``--db URL`` (or ``--state-dir DIR``), the store directly: a finished demo's state directory
needs no running service. ``--json`` prints the same JSON the API answers. Exit status as the
other client commands: 0 success, 1 the API refused (unknown job), 2 unreachable or bad input.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from trainmedic.cli.client import DEFAULT_URL, URL_ENV, _ApiAnswerError, _get, table
from trainmedic.core.accounting.format import duration, percent
from trainmedic.core.errors import InputError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    import os

    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("job_id", nargs="?", help="the job to account for")
    target.add_argument("--cluster", action="store_true", help="the whole cluster")
    parser.add_argument(
        "--url",
        default=os.environ.get(URL_ENV, DEFAULT_URL),
        help=f"the service's API (default: ${URL_ENV} or {DEFAULT_URL})",
    )
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--db", help="read this store URL instead of the API")
    source.add_argument(
        "--state-dir", type=Path, help="read <DIR>/state.db (a demo's --workdir) or trainmedic.db"
    )
    parser.add_argument("--json", action="store_true", help="print the JSON")
    parser.add_argument(
        "--token-file",
        help="read token (first line); default $TRAINMEDIC_API_READ_TOKEN or $TRAINMEDIC_API_TOKEN",
    )
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds (default 10)")


def _db_url(args: argparse.Namespace) -> str | None:
    if args.db:
        return str(args.db)
    if args.state_dir is None:
        return None
    for name in ("state.db", "trainmedic.db"):
        if (args.state_dir / name).is_file():
            return f"sqlite:///{args.state_dir / name}"
    raise InputError(f"--state-dir: no state.db or trainmedic.db in {args.state_dir}")


def _from_store(url: str, job_id: str | None) -> dict[str, Any]:
    """The API's JSON, computed from the store itself (same code as the API)."""
    from trainmedic.api import accounting
    from trainmedic.store import NotFound, Store

    store = Store(url)
    try:
        now = time.time()
        if job_id is None:
            summary, _ = accounting.cluster(store, now)
            return accounting.cluster_json(summary, accounting.store_scorecard(store))
        _facts, account = accounting.job_account(store, job_id, now)
        return accounting.accounting_json(account)
    except NotFound as error:
        raise _ApiAnswerError(str(error), 1) from error
    finally:
        store.close()


def run(args: argparse.Namespace) -> int:
    job_id = None if args.cluster else args.job_id
    url = _db_url(args)
    try:
        if url is not None:
            body = _from_store(url, job_id)
        elif job_id is None:
            body = _get(args, "/cluster/summary", {})
        else:
            body = _get(args, f"/jobs/{job_id}/accounting", {})
    except _ApiAnswerError as error:
        print(f"trainmedic report: {error}", file=sys.stderr)
        return error.exit_code
    if args.json:
        print(json.dumps(body, indent=2, sort_keys=True))
    elif job_id is None:
        print(cluster_text(body))
    else:
        print(job_text(body))
    return 0


dur = duration
pct = percent


def job_text(a: dict[str, Any]) -> str:
    lines = [
        f"job {a['job_id']}: goodput {pct(a['goodput'])} "
        f"({dur(a['productive_s'])} productive of {dur(a['wall_s'])}"
        f"{', ongoing' if a['ongoing'] else ''})",
        f"  checkpoint writes {dur(a['checkpoint_s'])} ({a['checkpoints_measured']} measured, "
        f"{a['checkpoints_unmeasured']} not); lost work {dur(a['lost_work_s'])}",
        "",
        table(
            ("WHERE THE TIME WENT", "SECONDS", "SHARE"),
            [
                (part, f"{s:.1f}", pct(s / a["wall_s"] if a["wall_s"] else None))
                for part, s in a["by_part"].items()
                if s
            ],
        ),
    ]
    gaps = a["interruptions"]
    if gaps:
        header = (
            *("ATTEMPT", "CAUSE", "DOWNTIME", "LOST", "SHUTDOWN"),
            *("DETECT", "DECIDE/ACT", "PERSON", "RESTART"),
        )
        rows = [
            (
                f"{g['attempt']}->{g['next_attempt'] if g['next_attempt'] is not None else '-'}"
                + (" (open)" if g["open"] else ""),
                f"{g['category']}" + (f"/{g['kind']}" if g["kind"] else ""),
                dur(g["downtime_s"]),
                dur(g["lost_work_s"]),
                dur(g["shutdown_s"]),
                dur(g["detection_s"]),
                dur(g["decision_action_s"]),
                dur(g["human_wait_s"]),
                dur(g["restart_s"]),
            )
            for g in gaps
        ]
        lines += ["", table(header, rows)]
    causes = [(c, f"{s:.1f}") for c, s in a["badput_by_cause"].items() if s]
    if causes:
        lines += ["", table(("BADPUT BY CAUSE", "SECONDS"), causes)]
    return "\n".join(lines)


def cluster_text(s: dict[str, Any]) -> str:
    day, week = s["windows"]
    lines = [
        f"cluster: goodput last day {pct(day['goodput'])}, last week {pct(week['goodput'])}; "
        f"{len(s['open_incidents'])} open incidents, {len(s['advice_waiting'])} advice waiting, "
        f"{len(s['drained_nodes'])} drained and {len(s['suspect_nodes'])} suspect nodes",
        "",
        table(
            ("JOB", "STATE", "GOODPUT", "ATTEMPTS", "INCIDENTS", "DOWN"),
            [
                (
                    j["job_id"],
                    j["state"] or "?",
                    pct(j["goodput"]),
                    j["attempts"],
                    j["incidents"],
                    "yes" if j["down_since"] else "",
                )
                for j in s["jobs"]
            ]
            or [("(none)", "", "", "", "", "")],
        ),
        "",
        table(
            ("BADPUT BY CAUSE", "LAST DAY S", "LAST WEEK S"),
            [
                (c, f"{day['badput_by_cause'][c]:.1f}", f"{week['badput_by_cause'][c]:.1f}")
                for c in day["badput_by_cause"]
            ],
        ),
    ]
    nodes = [("drained", n) for n in s["drained_nodes"]] + [
        ("suspect", n) for n in s["suspect_nodes"]
    ]
    if nodes:
        rows = [(n["node"], what, n["incidents"], dur(n["mtbi_s"])) for what, n in nodes]
        lines += ["", table(("NODE", "STATUS", "INCIDENTS", "MTBI"), rows)]
    card = s["scorecard"]
    if card["answered"]:
        rows = [
            (r["key"], r["answered"], pct(r["agreement"]), pct(r["action_match"]))
            for r in card["by_category"]
        ]
        lines += ["", table(("SCORECARD CATEGORY", "ANSWERED", "AGREED", "AS ADVISED"), rows)]
    return "\n".join(lines)
