"""``trainmedic analyze [--json] [--since TIME] PATH...``: attribute failed jobs' logs offline.

Each PATH is a file or a directory (one job's logs). Every input is analysed even when an
earlier one cannot be read; the exit status is 2 if any input was unreadable, else 0.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime

from trainmedic.core.errors import InputError
from trainmedic.offline.analyze import analyze_path
from trainmedic.offline.report import format_text, to_json_dict


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="+", metavar="PATH", help="a log file or a job directory")
    parser.add_argument("--json", action="store_true", help="one JSON object per input per line")
    parser.add_argument(
        "--since",
        type=_moment,
        metavar="TIME",
        help="when the attempt to judge started (ISO 8601 with a zone, or epoch seconds): a "
        "node's kernel log (<node>/kern.log) counts from 10 s before it, as the live service "
        "reads it; older kernel lines (other jobs', earlier attempts') are no evidence",
    )


def _moment(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a time: ISO 8601 with a zone (2026-12-01T14:50:00+00:00) or "
            "epoch seconds"
        ) from None
    if moment.tzinfo is None:
        raise argparse.ArgumentTypeError(
            f"{text!r} has no zone: add one (e.g. +00:00 or Z), the kernel logs' times are "
            "compared with it"
        )
    return moment.timestamp()


def run(args: argparse.Namespace) -> int:
    status = 0
    first = True
    for path in args.paths:
        try:
            result = analyze_path(path, since=args.since)
        except InputError as exc:
            print(f"trainmedic analyze: {exc}", file=sys.stderr)
            status = 2
            continue
        if args.json:
            print(json.dumps(to_json_dict(result), ensure_ascii=False), flush=True)
        else:
            if not first:
                print()
            print(format_text(result), flush=True)
        first = False
    return status
