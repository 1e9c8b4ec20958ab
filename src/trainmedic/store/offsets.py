"""Where the service left each followed log file (``sources.offsets`` decides what it means).

One row per path, replaced as a whole: the service saves what changed once per cycle, in one
transaction, and reads everything back when it starts.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

import sqlalchemy as sa

from trainmedic.store import schema
from trainmedic.store.base import StoreBase
from trainmedic.store.records import FollowerOffset

_offsets = schema.follower_offsets
_FIELDS = FollowerOffset.__dataclass_fields__


class OffsetLike(Protocol):
    """``sources.offsets.FilePosition`` (the store does not import the sources)."""

    @property
    def path(self) -> str: ...
    @property
    def device(self) -> int: ...
    @property
    def inode(self) -> int: ...
    @property
    def head_len(self) -> int: ...
    @property
    def head_hash(self) -> str: ...
    @property
    def offset(self) -> int: ...
    @property
    def line_no(self) -> int: ...
    @property
    def saved_at(self) -> float: ...


_WIDE = ("device", "inode")  # unsigned 64-bit numbers, kept in signed BIGINT columns


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _unsigned(value: int) -> int:
    return value + (1 << 64) if value < 0 else value


def _offset_from_row(row: Mapping[Any, Any]) -> FollowerOffset:
    return FollowerOffset(
        path=str(row["path"]),
        device=_unsigned(int(row["device"])),
        inode=_unsigned(int(row["inode"])),
        head_len=int(row["head_len"]),
        head_hash=str(row["head_hash"]),
        offset=int(row["offset"]),
        line_no=int(row["line_no"]),
        saved_at=float(row["saved_at"]),
    )


def path_key(path: str) -> str:
    return hashlib.sha256(path.encode("utf-8", "surrogateescape")).hexdigest()


class OffsetsRepository(StoreBase):
    def save_follower_offsets(self, positions: Iterable[OffsetLike]) -> int:
        """Replace the stored position of each path given; returns how many were written."""
        rows = {}
        for p in positions:
            key = path_key(p.path)
            row = {name: getattr(p, name) for name in _FIELDS}
            row.update({name: _signed(row[name]) for name in _WIDE})
            rows[key] = {"path_key": key, **row}
        if not rows:
            return 0
        with self._write(f"save {len(rows)} follower offsets") as conn:
            self._delete_keys(conn, list(rows))
            conn.execute(sa.insert(_offsets), list(rows.values()))
        return len(rows)

    def follower_offsets(self) -> list[FollowerOffset]:
        with self._read("follower offsets") as conn:
            rows = conn.execute(sa.select(_offsets).order_by(_offsets.c.path)).mappings()
            return [_offset_from_row(row) for row in rows]

    def forget_follower_offsets(self, paths: Iterable[str]) -> None:
        """Drop the positions of files no longer followed (their job is over)."""
        keys = [path_key(p) for p in paths]
        if keys:
            with self._write("forget follower offsets") as conn:
                self._delete_keys(conn, keys)

    @staticmethod
    def _delete_keys(conn: sa.Connection, keys: list[str]) -> None:
        for first in range(0, len(keys), 500):  # SQLite caps the bound parameters
            chunk = keys[first : first + 500]
            conn.execute(sa.delete(_offsets).where(_offsets.c.path_key.in_(chunk)))
