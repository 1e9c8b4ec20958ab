"""``trainmedic serve``: the recovery service (loop + HTTP API) until SIGTERM/SIGINT, with
its watchdog as a supervised child process unless ``[watchdog] embedded = false``."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import threading
import uuid
from pathlib import Path
from types import FrameType


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", type=Path, help="TOML config file (default: built-in)")
    parser.add_argument("--no-api", action="store_true", help="do not serve the HTTP API")
    parser.add_argument("-v", "--verbose", action="store_true")


def run(args: argparse.Namespace) -> int:
    from trainmedic.api.app import create_app
    from trainmedic.api.server import ApiServer, exposure_warnings
    from trainmedic.service.config import default_config, load_config
    from trainmedic.service.loop import Service
    from trainmedic.service.supervisor import ChildSupervisor, watchdog_command
    from trainmedic.service.wiring import build_adapter, kernel_logs_of
    from trainmedic.store import Store, redact_url
    from trainmedic.store.leader import leadership_for

    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    config = load_config(args.config) if args.config else default_config()
    Path(config.service.state_dir).mkdir(parents=True, exist_ok=True)
    store = Store(config.service.db_url)
    warn_if_shared_sqlite(config.service.db_url)
    adapter = build_adapter(config)
    notifier = None
    if config.notify.slack_urls or config.notify.json_urls:
        from trainmedic.service.notify import Notifier

        notifier = Notifier(config.notify)
    service = Service(
        config,
        store,
        adapter,
        # Unique per process: with several services on one store, whoever leads owns advice.
        executor_id=f"service@{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}",
        kernel_logs=kernel_logs_of(adapter),
        leadership=leadership_for(store),
        notifier=notifier,
    )
    stop = threading.Event()

    def _stop(signum: int, _frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    watchdog = None
    if config.watchdog.embedded:
        watchdog = ChildSupervisor(watchdog_command(str(args.config) if args.config else None))
        watchdog.start()
    api = None
    if not args.no_api:
        for warning in exposure_warnings(config):
            logging.getLogger("trainmedic.serve").warning("%s", warning)
        api = ApiServer(
            create_app(
                store,
                config,
                sources=service.sources,
                collectors=[notifier.collector()] if notifier else [],
            ),
            host=config.service.api_host,
            port=config.service.api_port,
            ssl_certfile=config.api.tls_certfile,
            ssl_keyfile=config.api.tls_keyfile,
        )
        api.start()
    print(
        f"trainmedic serve: mode={config.service.mode} scheduler={adapter.name} "
        f"db={redact_url(config.service.db_url)}"
        + (f" api={api.url}" if api else "")
        + (" watchdog=embedded" if watchdog else " watchdog=apart"),
        flush=True,
    )
    try:
        service.run(stop)
    finally:
        if api is not None:
            api.stop()
        if notifier is not None:
            notifier.close()
        if watchdog is not None:
            watchdog.stop()
        store.close()
    return 0


def warn_if_shared_sqlite(db_url: str, mounts: str | None = None) -> None:
    """SQLite locking (and the leader lock file) is unreliable on a network filesystem."""
    from trainmedic.store.netfs import sqlite_on_network_filesystem

    warning = sqlite_on_network_filesystem(db_url, mounts)
    if warning is not None:
        logging.getLogger("trainmedic.serve").warning("%s", warning)
