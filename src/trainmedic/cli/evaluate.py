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
    parser.add_argument(
        "--crossval",
        action="store_true",
        help="leave one DIR out at a time: the rule layers against the rule layers plus the "
        "learned evidence layer trained on the other DIRs only",
    )
    parser.add_argument(
        "--first-sight",
        action="store_true",
        help="pool the first-sight tables recorded under DIR (DIR/first_sight.toml names each "
        "batch's): accuracy and reliability on logs the attribution had never seen",
    )
    parser.add_argument(
        "--replay-second-opinion",
        action="store_true",
        help="replay the learned layer's second opinion on each batch's recorded first sight, "
        "the classifier trained on the batches before it only",
    )


def run(args: argparse.Namespace) -> int:
    corpora = [Path(c) for c in args.corpus]
    for corpus in corpora:
        if not corpus.is_dir():
            raise InputError(f"{corpus}: not a directory")
    if args.replay_second_opinion:
        from trainmedic.offline.second_opinion import format_replay, replay

        print("\n\n".join(format_replay(replay(corpus)) for corpus in corpora))
        return 0
    if args.first_sight:
        from trainmedic.offline.expert_baseline import expert_section
        from trainmedic.offline.first_sight import format_first_sight, load

        loaded = [(corpus, load(corpus)) for corpus in corpora]
        print(format_first_sight([b for _, batches in loaded for b in batches]))
        for corpus, batches in loaded:
            section = expert_section(corpus, batches)
            if section is not None:
                print("\n" + section)
        return 0
    if args.crossval:
        from trainmedic.offline.crossval import crossvalidate, format_crossval
        from trainmedic.offline.train_evidence import load_corpus

        logs = [log for corpus in corpora for log in load_corpus(corpus)]
        print(format_crossval(crossvalidate(logs)))
        return 0
    data = summary(evaluate_corpora(corpora))
    print(json.dumps(data.to_json()) if args.json else format_summary(data))
    return 0
