"""A throwaway PostgreSQL server for the real-component tests: ``initdb`` + ``pg_ctl`` on a
free port in a temp dir, run as the ``postgres`` user when we are root (initdb refuses root),
stopped at the end. Debian's ``postgresql`` package provides the binaries (bootstrap.sh)."""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import sqlalchemy as sa
from tests.integration.serve_helpers import free_port


class PostgresUnavailable(RuntimeError):
    pass


def _pg_bin(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return candidates[-1] if candidates else None


def _as_db_user(argv: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return argv
    runuser = shutil.which("runuser")
    if runuser:
        return [runuser, "-u", "postgres", "--", *argv]
    return ["su", "postgres", "-s", "/bin/sh", "-c", " ".join(argv)]


def _run(argv: list[str]) -> None:
    subprocess.run(_as_db_user(argv), check=True, capture_output=True, text=True, timeout=120)


@contextlib.contextmanager
def postgres_server() -> Iterator[str]:
    """A running server; yields the URL of its ``postgres`` database (superuser, trust)."""
    initdb, pg_ctl = _pg_bin("initdb"), _pg_bin("pg_ctl")
    if not initdb or not pg_ctl:
        raise PostgresUnavailable(
            "PostgreSQL binaries not found (scripts/bootstrap.sh installs postgresql)"
        )
    base = Path(tempfile.mkdtemp(prefix="trainmedic-pg-"))
    data = base / "data"
    if os.geteuid() == 0:
        shutil.chown(base, user="postgres")
    port = free_port()
    _run([initdb, "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8"])
    options = f"-p {port} -k {base} -c listen_addresses=127.0.0.1 -c fsync=off"
    log = str(base / "log")
    _run([pg_ctl, "-D", str(data), "-l", log, "-w", "-t", "60", "-o", options, "start"])
    try:
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run(
            _as_db_user([pg_ctl, "-D", str(data), "-m", "immediate", "-w", "stop"]),
            capture_output=True,
            timeout=60,
        )
        shutil.rmtree(base, ignore_errors=True)


def fresh_database(server_url: str, name: str) -> str:
    """A new, empty database on the server (advisory locks are per database, so two tests'
    services never elect each other); its URL."""
    engine = sa.create_engine(server_url, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}"'))
            conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    finally:
        engine.dispose()
    return str(sa.make_url(server_url).set(database=name).render_as_string(hide_password=False))
