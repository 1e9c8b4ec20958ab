"""``trainmedic eval DIR``: attribution accuracy on a labelled corpus (DIR/labels.jsonl)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from trainmedic.core.errors import InputError
from trainmedic.offline.evaluate import evaluate, format_summary, read_labels, summary


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("corpus", metavar="DIR", help="directory holding labels.jsonl and the logs")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")


def run(args: argparse.Namespace) -> int:
    corpus = Path(args.corpus)
    if not corpus.is_dir():
        raise InputError(f"{corpus}: not a directory")
    data = summary(evaluate(corpus, read_labels(corpus)))
    print(json.dumps(data.to_json()) if args.json else format_summary(data))
    return 0
