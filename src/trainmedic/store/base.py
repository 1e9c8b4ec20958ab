"""Engine set-up and transactions shared by the store's repositories.

SQLite is the default and is shared by several processes (service, watchdog, CLI, API), so:

- WAL journal: readers never block the writer and vice versa;
- ``busy_timeout``: a writer waits for another writer instead of failing at once;
- write transactions start with ``BEGIN IMMEDIATE``: the write lock is taken up front, so two
  read-then-write transactions cannot deadlock on lock upgrade (SQLite answers that case with
  SQLITE_BUSY at once, whatever the timeout). Read transactions use a plain ``BEGIN``.

PostgreSQL needs none of that; ``SELECT ... FOR UPDATE`` (a no-op on SQLite) serialises the
read-modify-write cases there. Every SQLAlchemy error is translated into ``StoreError`` here,
at the border, so callers never import SQLAlchemy.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event, exc
from sqlalchemy.engine import Connection, Engine

from trainmedic.core.errors import StoreError
from trainmedic.store import schema

SQLITE_BUSY_TIMEOUT_MS = 30_000
_WRITE_OPTION = "trainmedic_write"


class DuplicateKey(StoreError):
    """An insert hit a unique constraint; repositories catch it to stay idempotent."""


class NotFound(StoreError):
    """The job, incident or advice named does not exist."""


class InvalidTransition(StoreError):
    """An advice status change that the life cycle does not allow."""


def _one_line(detail: object) -> str:
    """Driver messages span lines (psycopg adds hints); errors here are one line."""
    return " ".join(str(detail).split())


_PASSWORD_PARAM = re.compile(r"(?i)\b(password=)[^&;\s]*")


def redact_url(url: str) -> str:
    """``url`` with its password (``user:secret@host`` or ``?password=``) shown as ``***``:
    the form every message and log line gets, even for a URL SQLAlchemy cannot parse."""
    scheme, sep, rest = url.partition("://")
    if sep:
        userinfo, at, location = rest.rpartition("@")
        if at and ":" in userinfo:
            rest = f"{userinfo.split(':', 1)[0]}:***@{location}"
        url = f"{scheme}://{rest}"
    return _PASSWORD_PARAM.sub(r"\1***", url)


def normalise_url(url: str) -> str:
    """Default PostgreSQL URLs to the psycopg 3 driver (the ``postgres`` extra installs it)."""
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


def _on_sqlite_connect(dbapi_connection: Any, _record: Any) -> None:
    # Let SQLAlchemy's "begin" hook below emit BEGIN itself (pysqlite's own implicit
    # transactions would defeat BEGIN IMMEDIATE).
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


def _on_sqlite_begin(conn: Connection) -> None:
    write = conn.get_execution_options().get(_WRITE_OPTION, False)
    conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")


def make_engine(url: str) -> Engine:
    url = normalise_url(url)
    parsed = sa.make_url(url)
    if parsed.get_backend_name() != "sqlite":
        return sa.create_engine(url, pool_pre_ping=True)
    database = parsed.database or ""
    if database and database != ":memory:" and not database.startswith("file:"):
        Path(database).expanduser().parent.mkdir(parents=True, exist_ok=True)
    memory = database in ("", ":memory:")
    engine = sa.create_engine(
        url,
        connect_args={"check_same_thread": False, "timeout": SQLITE_BUSY_TIMEOUT_MS / 1000},
        # One shared connection for an in-memory database, or each connection sees its own.
        poolclass=sa.pool.StaticPool if memory else None,
    )
    event.listen(engine, "connect", _on_sqlite_connect)
    event.listen(engine, "begin", _on_sqlite_begin)
    return engine


class StoreBase:
    """Owns the engine; repositories (mixins) use ``_read()`` and ``_write()``."""

    def __init__(self, url: str) -> None:
        self.url = normalise_url(url)
        try:
            self._engine = make_engine(self.url)
            self._safe_url = self._engine.url.render_as_string(hide_password=True)
        except (exc.SQLAlchemyError, exc.ArgumentError, OSError) as error:
            # The driver's message may quote the URL: never with its password.
            detail = _one_line(error).replace(url, redact_url(url))
            raise StoreError(f"store {redact_url(url)!r}: {detail}") from error
        self._create_schema()

    def _create_schema(self) -> None:
        try:
            with self._write("create schema") as conn:
                schema.metadata.create_all(conn)
                present = conn.execute(
                    sa.select(schema.meta.c.value).where(schema.meta.c.key == "schema_version")
                ).scalar_one_or_none()
                if present is None:
                    conn.execute(
                        sa.insert(schema.meta).values(
                            key="schema_version", value=str(schema.SCHEMA_VERSION)
                        )
                    )
        except DuplicateKey:
            # Another process created the schema at the same moment: nothing left to do.
            pass

    def close(self) -> None:
        self._engine.dispose()

    def dedicated_connection(self) -> Connection:
        """A connection of its own in autocommit mode (leader election holds one open)."""
        return self._engine.connect().execution_options(isolation_level="AUTOCOMMIT")

    @contextmanager
    def _transaction(self, write: bool, what: str) -> Iterator[Connection]:
        try:
            with self._engine.connect() as conn:
                if write:
                    conn.execution_options(**{_WRITE_OPTION: True})
                with conn.begin():
                    yield conn
        except exc.IntegrityError as error:
            raise DuplicateKey(
                f"store {self._safe_url}: {what}: {_one_line(error.orig)}"
            ) from error
        except exc.SQLAlchemyError as error:
            detail = getattr(error, "orig", None) or error
            raise StoreError(f"store {self._safe_url}: {what}: {_one_line(detail)}") from error

    def _read(self, what: str = "read") -> AbstractContextManager[Connection]:
        return self._transaction(False, what)

    def _write(self, what: str = "write") -> AbstractContextManager[Connection]:
        return self._transaction(True, what)
