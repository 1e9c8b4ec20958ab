"""Which filesystem a path lives on, from the kernel's mount table: SQLite's locks (and the
leader lock file beside the database) are not reliable on a network filesystem, so the
default SQLite store must not sit on one unnoticed.

``/proc/self/mountinfo`` is read (the mount table of this process's namespace, with every
mount stacked on a point in mount order); ``/proc/mounts`` lines are understood as well.
The parser is pure: tests feed it recorded lines.
"""

from __future__ import annotations

import re
from pathlib import Path

import sqlalchemy as sa

MOUNTINFO = Path("/proc/self/mountinfo")
NETWORK_FS = frozenset(
    {
        "nfs",
        "nfs4",
        "cifs",
        "smb3",
        "smbfs",
        "ncpfs",
        "lustre",
        "gpfs",
        "beegfs",
        "ceph",
        "glusterfs",
        "panfs",
        "9p",
        "afs",
        "coda",
        "wekafs",
        "fuse.sshfs",
        "fuse.gcsfuse",
        "fuse.s3fs",
        "fuse.ceph-fuse",
        "fuse.glusterfs",
        "fuse.juicefs",
        "fuse.rclone",
    }
)
_OCTAL = re.compile(r"\\([0-7]{3})")


def _unescape(field: str) -> str:
    """The kernel writes space, tab, newline and backslash in paths as octal escapes."""
    return _OCTAL.sub(lambda m: chr(int(m.group(1), 8)), field)


def parse_mounts(text: str) -> list[tuple[str, str]]:
    """(mount point, filesystem type) per mount, in mount order, from ``mountinfo`` lines
    (``36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw``) or ``/proc/mounts``
    lines (``/dev/root / ext4 rw 0 0``); lines of neither shape are skipped."""
    mounts: list[tuple[str, str]] = []
    for line in text.splitlines():
        fields = line.split()
        if " - " in line and len(fields) >= 9:
            after = fields[fields.index("-") + 1 :] if "-" in fields else []
            if after:
                mounts.append((_unescape(fields[4]), after[0]))
        elif len(fields) >= 3:
            mounts.append((_unescape(fields[1]), fields[2]))
    return mounts


def filesystem_of(path: Path, mounts: list[tuple[str, str]]) -> str | None:
    """The type of the mount ``path`` is on: the longest mount point above it, the last one
    mounted there when several are stacked (autofs, then the NFS it mounted)."""
    target = str(path)
    best, best_type = "", None
    for point, fstype in mounts:
        inside = target == point or target.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, best_type = point, fstype
    return best_type


def network_filesystem(path: Path, mounts: str | None = None) -> str | None:
    """The network filesystem type ``path`` lives on (``mounts``: the mount table's text,
    default this process's ``/proc/self/mountinfo``), or None."""
    if mounts is None:
        try:
            mounts = MOUNTINFO.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None
    fstype = filesystem_of(path.expanduser().resolve(), parse_mounts(mounts))
    return fstype if fstype in NETWORK_FS else None


def sqlite_on_network_filesystem(db_url: str, mounts: str | None = None) -> str | None:
    """For a SQLite file database on a network filesystem: a one-line warning; else None."""
    try:
        url = sa.make_url(db_url)
    except sa.exc.ArgumentError:
        return None
    database = url.database or ""
    if url.get_backend_name() != "sqlite" or database in ("", ":memory:"):
        return None
    if database.startswith("file:"):
        return None  # a URI filename: in-memory or shared-cache forms, not a plain path
    fstype = network_filesystem(Path(database).expanduser().parent, mounts)
    if fstype is None:
        return None
    return (
        f"the SQLite database {database} is on a network filesystem ({fstype}): its locks "
        "(and the leader lock file beside it) are not reliable there; put it on a local "
        "disk or use PostgreSQL (service.db_url)"
    )
