"""``trainmedic watchdog``: release jobs trainmedic held too long (fails open)."""

from __future__ import annotations

import argparse
import logging
import signal
import threading
from pathlib import Path
from types import FrameType


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", type=Path, help="TOML config file (default: built-in)")
    parser.add_argument(
        "--timeout", type=float, help="seconds a hold may last (default: [watchdog] timeout_s)"
    )
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between checks")
    parser.add_argument("--once", action="store_true", help="check once and exit")


def run(args: argparse.Namespace) -> int:
    from trainmedic.service.config import default_config, load_config
    from trainmedic.service.watchdog import Watchdog
    from trainmedic.service.wiring import build_adapter
    from trainmedic.store import Store

    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s: %(message)s")
    config = load_config(args.config) if args.config else default_config()
    Path(config.service.state_dir).mkdir(parents=True, exist_ok=True)
    timeout = args.timeout if args.timeout is not None else config.watchdog.timeout_s
    watchdog = Watchdog(Store(config.service.db_url), build_adapter(config), timeout_s=timeout)
    if args.once:
        for release in watchdog.check():
            state = "released" if release.ok else f"failed: {release.detail}"
            print(
                f"job {release.job_id}: held {release.released_at - release.held_at:.1f} s, {state}"
            )
        return 0
    stop = threading.Event()

    def _stop(signum: int, _frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    print(f"trainmedic watchdog: releasing holds older than {timeout:g} s", flush=True)
    watchdog.run(stop, args.interval)
    return 0
