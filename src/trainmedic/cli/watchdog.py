"""``trainmedic watchdog``: release jobs trainmedic held too long (fails open).

``trainmedic serve`` starts it by itself (``[watchdog] embedded = true``); run it apart with
``embedded = false``. It works without the database: the hold file beside it is enough.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import threading
from pathlib import Path
from types import FrameType


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", type=Path, help="TOML config file (default: built-in)")
    parser.add_argument(
        "--timeout", type=float, help="seconds a hold may last (default: [watchdog] timeout_s)"
    )
    parser.add_argument(
        "--interval", type=float, help="seconds between checks (default: [watchdog] interval_s)"
    )
    parser.add_argument("--once", action="store_true", help="check once and exit")
    parser.add_argument(
        "--parent",
        type=int,
        help="pid of the service that started it: once that is gone, exit when no hold is open",
    )


def run(args: argparse.Namespace) -> int:
    from trainmedic.core.errors import StoreError
    from trainmedic.service.config import default_config, load_config
    from trainmedic.service.holdfile import hold_file_in
    from trainmedic.service.supervisor import SingleInstance
    from trainmedic.service.watchdog import Watchdog
    from trainmedic.service.wiring import build_adapter
    from trainmedic.store import Store

    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s: %(message)s")
    config = load_config(args.config) if args.config else default_config()
    state_dir = config.service.state_dir
    Path(state_dir).mkdir(parents=True, exist_ok=True)
    timeout = args.timeout if args.timeout is not None else config.watchdog.timeout_s
    interval = args.interval if args.interval is not None else config.watchdog.interval_s

    def open_store() -> Store:
        return Store(config.service.db_url)

    try:
        store: Store | None = open_store()
    except StoreError as exc:  # fail open all the same: the hold file is enough
        logging.getLogger("trainmedic.watchdog").warning("no database yet: %s", exc)
        store = None
    watchdog = Watchdog(
        store,
        build_adapter(config),
        timeout_s=timeout,
        hold_file=hold_file_in(state_dir),
        open_store=open_store,
    )
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
    lock = SingleInstance(state_dir)
    if not lock.try_acquire():
        print(
            f"trainmedic watchdog: another watchdog runs for {state_dir}: standing by", flush=True
        )
        if not lock.wait(stop, interval):
            return 0
    print(f"trainmedic watchdog: releasing holds older than {timeout:g} s", flush=True)

    def orphaned() -> bool:
        return args.parent is not None and os.getppid() != args.parent

    watchdog.run(stop, interval, done=orphaned)
    return 0
