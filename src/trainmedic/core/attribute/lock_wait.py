"""A log that ends waiting for a file lock on an object store mounted through FUSE.

Python's ``filelock`` (and the copy ``datasets`` and ``transformers`` once vendored) logs each
try: "Attempting to acquire lock N on P", "Lock N not acquired on P, waiting 0.05 seconds ...",
then "Lock N acquired on P" or, at the end, "released". Hugging Face caches take such a lock
beside every download and dataset build. On an object store mounted through FUSE (Databricks'
``/dbfs``, a GCS bucket at ``/gcs`` or through gcsfuse, s3fs, blobfuse, goofys, Mountpoint for
S3) the lock file cannot be locked as on a disk (no POSIX or flock locks, or ones not shared
between processes), so a waiter may never get it: the cache's location is the cause, and the
usual cure is a cache on local disk. So a log whose last lock line is a wait on such a path,
with no acquisition after it, is a storage hang, as a guess (0.4): a lock held by a live
process on the same mount looks the same while it lasts. A wait on a local path is another
process's lock, or a stale one, and is not this finding.

Reads the sample of the input's lines ``analyze`` passes (``JobFacts.text``); the live engine
passes none and it is silent.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from trainmedic.core.attribute.phase import PhaseFinding
from trainmedic.core.model import Category, Kind

CONFIDENCE = 0.4
"""A guess: a lock another live process holds on the mount reads the same while it lasts."""

_LOCK_LINE = re.compile(
    r"\bLock \S+ (?P<state>not acquired|acquired|released) on (?P<path>\S+?)(?:,|\s|$)"
)
# Object stores mounted through FUSE, by their platforms' mount points or their clients' names.
_OBJECT_MOUNT = re.compile(
    r"^/(?:dbfs|gcs)/"
    r"|/(?:gcsfuse|s3fs|blobfuse2?|goofys|mountpoint-s3|mount-s3)[\w-]*/"
)


def lock_wait_on_object_mount(text: Sequence[str]) -> PhaseFinding | None:
    """The storage hang when the last lock line of ``text`` is a wait on an object-store
    mount."""
    last = None
    for line in text:
        found = _LOCK_LINE.search(line)
        if found is not None:
            last = found
    if last is None or last.group("state") != "not acquired":
        return None
    path = last.group("path")
    if not _OBJECT_MOUNT.search(path):
        return None
    return PhaseFinding(
        Category.STORAGE,
        Kind.HANG,
        CONFIDENCE,
        f"the log ends waiting for the file lock {path[:120]!r}, on an object store mounted "
        "through FUSE, which does not hold file locks as a disk does: the lock may never be "
        "granted (a cache on local disk avoids it)",
    )
