"""``trainmedic analyze [--json] PATH...``: attribute failed jobs' logs offline.

Each PATH is a file or a directory (one job's logs). Every input is analysed even when an
earlier one cannot be read; the exit status is 2 if any input was unreadable, else 0.
"""

from __future__ import annotations

import argparse
import json
import sys

from trainmedic.core.errors import InputError
from trainmedic.offline.analyze import analyze_path
from trainmedic.offline.report import format_text, to_json_dict


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="+", metavar="PATH", help="a log file or a job directory")
    parser.add_argument("--json", action="store_true", help="one JSON object per input per line")


def run(args: argparse.Namespace) -> int:
    status = 0
    first = True
    for path in args.paths:
        try:
            result = analyze_path(path)
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
