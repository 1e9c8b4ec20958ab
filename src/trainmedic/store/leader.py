"""Leader election on the store: of several ``serve`` processes on one database, one acts.

* PostgreSQL: a session-level advisory lock (``pg_try_advisory_lock``) held on a connection
  of its own. If the leader dies or its connection drops, PostgreSQL releases the lock and a
  standby's next try wins; a leader whose connection broke notices at its next check.
* SQLite: ``flock`` on a lock file beside the database. The kernel releases it when the
  process dies (kill -9 included). ``flock`` is not reliable on network filesystems, which is
  one more reason the SQLite file must not live on one (``store.netfs`` tells).
* An in-memory SQLite database is private to one process: that process always leads.

``hold()`` is cheap and is called once per service cycle: it returns whether this process
leads now, trying to take the lead when it does not.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
from pathlib import Path
from typing import Protocol

import sqlalchemy as sa
from sqlalchemy import exc
from sqlalchemy.engine import Connection

from trainmedic.store.base import StoreBase

log = logging.getLogger(__name__)

ADVISORY_KEY = 0x7472_6D65_6463  # "trmedc": one lock per database for every trainmedic


class Leadership(Protocol):
    def hold(self) -> bool: ...

    def release(self) -> None: ...


class SoleLeader:
    """No one to share with (an in-memory database)."""

    def hold(self) -> bool:
        return True

    def release(self) -> None:
        return None


class FileLeadership:
    """``flock`` on ``path``: held while this process keeps the file open."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def hold(self) -> bool:
        if self._fd is not None:
            return True
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd
        return True

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops the flock
            self._fd = None


class AdvisoryLockLeadership:
    """``pg_try_advisory_lock`` on a dedicated connection."""

    def __init__(self, store: StoreBase, key: int = ADVISORY_KEY) -> None:
        self._store = store
        self._key = key
        self._conn: Connection | None = None

    def hold(self) -> bool:
        if self._conn is not None:
            try:
                self._conn.execute(sa.text("SELECT 1"))
                return True
            except exc.SQLAlchemyError as error:
                log.warning("leader connection lost (%s): standing down", type(error).__name__)
                self._drop()
        try:
            conn = self._store.dedicated_connection()
        except exc.SQLAlchemyError as error:
            log.warning("cannot reach the store for leader election: %s", type(error).__name__)
            return False
        try:
            won = bool(
                conn.execute(sa.text("SELECT pg_try_advisory_lock(:k)"), {"k": self._key}).scalar()
            )
        except exc.SQLAlchemyError:
            conn.close()
            return False
        if not won:
            conn.close()
            return False
        self._conn = conn
        return True

    def release(self) -> None:
        if self._conn is not None:
            # Closing the connection releases the lock anyway.
            with contextlib.suppress(exc.SQLAlchemyError):
                self._conn.execute(sa.text("SELECT pg_advisory_unlock(:k)"), {"k": self._key})
            self._drop()

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(exc.SQLAlchemyError):
                conn.close()


def leadership_for(store: StoreBase) -> Leadership:
    """The election that fits the store's database."""
    url = sa.make_url(store.url)
    if url.get_backend_name() != "sqlite":
        return AdvisoryLockLeadership(store)
    database = url.database or ""
    if database in ("", ":memory:") or database.startswith("file:"):
        return SoleLeader()
    return FileLeadership(Path(database).expanduser().with_name(Path(database).name + ".leader"))
