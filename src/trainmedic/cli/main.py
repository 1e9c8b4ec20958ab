"""The ``trainmedic`` command line.

Each subcommand lives in its own module under ``trainmedic.cli`` exposing
``add_arguments(parser)`` and ``run(args) -> int``. Only the chosen module is imported, so
``trainmedic analyze`` never pays for FastAPI, SQLAlchemy or torch.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from types import ModuleType

from trainmedic import __version__
from trainmedic.core.errors import TrainmedicError

# name -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "analyze": ("trainmedic.cli.analyze", "attribute a failed job's logs offline"),
    "eval": ("trainmedic.cli.evaluate", "measure attribution on a labelled corpus"),
    "serve": ("trainmedic.cli.serve", "run the recovery service"),
    "demo": ("trainmedic.cli.demo", "end-to-end demo: real DDP training, faults, recovery"),
    "status": ("trainmedic.cli.client", "show watched jobs (reads the API)"),
    "incidents": ("trainmedic.cli.client", "list incidents (reads the API)"),
    "advice": ("trainmedic.cli.client", "list advice (reads the API)"),
    "report": ("trainmedic.cli.report", "downtime and goodput of a job or the cluster"),
    "watchdog": ("trainmedic.cli.watchdog", "release jobs held too long (fails open)"),
    "breaker": ("trainmedic.cli.breaker", "show or reset the drain circuit breaker (the API)"),
}


def _load(name: str) -> ModuleType:
    return importlib.import_module(COMMANDS[name][0])


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="trainmedic", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"trainmedic {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (_module, help_text) in COMMANDS.items():
        command_parser = sub.add_parser(name, help=help_text, description=help_text)
        if name == only:
            _load(name).add_arguments(command_parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    chosen = next((a for a in args_list if not a.startswith("-")), None)
    only = chosen if chosen in COMMANDS else None
    parser = build_parser(only)
    args = parser.parse_args(args_list)
    if args.command is None:
        parser.print_help()
        return 2
    try:
        result: int = _load(args.command).run(args)
    except TrainmedicError as exc:
        print(f"trainmedic {args.command}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return result


if __name__ == "__main__":
    sys.exit(main())
