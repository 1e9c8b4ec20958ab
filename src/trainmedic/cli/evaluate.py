"""``trainmedic eval DIR...``: attribution accuracy on labelled corpora (DIR/labels.jsonl).

Several DIRs are measured as one set (each file named with its corpus): per-category recall,
the confusion matrix, the reliability table and the safety counts then cover them all.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from trainmedic.core.errors import InputError
from trainmedic.offline.evaluate import evaluate_corpora, format_summary, summary


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "corpus", metavar="DIR", nargs="+", help="directory holding labels.jsonl and the logs"
    )
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")


def run(args: argparse.Namespace) -> int:
    corpora = [Path(c) for c in args.corpus]
    for corpus in corpora:
        if not corpus.is_dir():
            raise InputError(f"{corpus}: not a directory")
    data = summary(evaluate_corpora(corpora))
    print(json.dumps(data.to_json()) if args.json else format_summary(data))
    return 0
