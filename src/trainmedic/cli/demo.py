"""``trainmedic demo``: the end-to-end demo on this machine (see trainmedic.demo.runner)."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from trainmedic.core.errors import InputError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--mode",
        choices=("action", "monitor"),
        default="action",
        help="action: trainmedic restarts/excludes/drains/stops; monitor: advice only",
    )
    parser.add_argument("--report", type=Path, help="write the JSON report to this file")
    parser.add_argument(
        "--faults",
        help="comma-separated subset and order of faults (default: xid79,hang,slow_rank,app_error)",
    )
    parser.add_argument("--workdir", type=Path, help="keep the demo's files here (default: temp)")
    parser.add_argument(
        "--scheduler",
        choices=("local", "slurm"),
        default="local",
        help="local: torchrun process groups on virtual nodes; slurm: a real Slurm lab "
        "cluster (munge, slurmctld, 4 slurmd) started for the demo and stopped after it",
    )
    parser.add_argument("--no-api", action="store_true", help="do not start the HTTP API")
    parser.add_argument("-v", "--verbose", action="store_true")


def run(args: argparse.Namespace) -> int:
    # Heavy imports (torch runs in the workers; FastAPI, SQLAlchemy here) only now.
    from trainmedic.demo.options import DemoOptions
    from trainmedic.demo.runner import DemoRunner
    from trainmedic.demo.scenarios import by_name

    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(name)s %(message)s",
    )
    try:
        scenarios = by_name(args.faults.split(",") if args.faults else None)
    except ValueError as exc:
        raise InputError(f"--faults: {exc}") from exc
    if args.report is not None and not args.report.parent.exists():
        raise InputError(f"--report: directory {args.report.parent} does not exist")
    options = DemoOptions(
        mode=args.mode, workdir=args.workdir, scenarios=scenarios, api=not args.no_api
    )
    runner_class = DemoRunner
    if args.scheduler == "slurm":
        from trainmedic.demo.slurm_job import SlurmDemoRunner

        runner_class = SlurmDemoRunner
    report = runner_class(options, say=lambda line: print(line, flush=True)).run()
    print(json.dumps(_summary(report)), flush=True)
    if args.report is not None:
        args.report.write_text(json.dumps(report, indent=2) + "\n")
        print(f"report written to {args.report}", file=sys.stderr)
    ok = all(
        i["kind"] == i["expected_kind"] and i["category"] == i["expected_category"]
        for i in report["incidents"]
    )
    return 0 if ok else 1


def _summary(report: dict[str, object]) -> dict[str, object]:
    return {k: v for k, v in report.items() if k != "incidents"}
