"""The local scheduler's process table on disk: ``state.json`` in the cluster directory,
read and rewritten (atomically) only under a thread lock plus an flock on ``state.lock``.

The file is what lets a new ``LocalScheduler`` on the same directory re-adopt the jobs a
killed one started, and what keeps two instances (or two threads) from racing a start.
"""

from __future__ import annotations

import dataclasses
import fcntl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from trainmedic.core.errors import SchedulerError
from trainmedic.schedulers.local.state import (
    ClusterState,
    JobRecord,
    NodeRecord,
    state_from_json,
    state_to_json,
    write_atomic,
)


class ClusterStateFile:
    """Transactions over ``<cluster_dir>/state.json`` (see the module docstring)."""

    def __init__(self, cluster_dir: Path) -> None:
        self._lock = threading.RLock()
        self.path = cluster_dir / "state.json"
        self._lock_path = cluster_dir / "state.lock"

    @contextmanager
    def transaction(self) -> Iterator[ClusterState]:
        """Hold the thread lock and the file lock; yield the current state. OS errors in
        the body (state file, job output, spawning) leave as SchedulerError."""
        try:
            with self._lock, open(self._lock_path, "a") as lock_file:
                fcntl.flock(lock_file, fcntl.LOCK_EX)
                try:
                    yield self._load()
                finally:
                    fcntl.flock(lock_file, fcntl.LOCK_UN)
        except OSError as exc:
            raise SchedulerError(f"local scheduler: {exc}") from exc

    def _load(self) -> ClusterState:
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return ClusterState(nodes=())
        try:
            return state_from_json(text)
        except (ValueError, KeyError, TypeError) as exc:
            raise SchedulerError(f"local scheduler: corrupt state {self.path}: {exc}") from exc

    def save(self, state: ClusterState) -> None:
        write_atomic(self.path, state_to_json(state))

    def put(self, state: ClusterState, job: JobRecord) -> ClusterState:
        """``state`` with ``job`` in it, saved; the state as it was when nothing changed."""
        if state.jobs.get(job.job_id) == job:
            return state  # unchanged: no write (poll runs often)
        state = dataclasses.replace(state, jobs={**state.jobs, job.job_id: job})
        self.save(state)
        return state

    def set_node(self, state: ClusterState, record: NodeRecord) -> None:
        nodes = tuple(record if n.name == record.name else n for n in state.nodes)
        self.save(dataclasses.replace(state, nodes=nodes))


def require_job(state: ClusterState, job_id: str) -> JobRecord:
    job = state.jobs.get(job_id)
    if job is None:
        raise SchedulerError(f"local scheduler: unknown job {job_id!r}")
    return job


def require_node(state: ClusterState, node: str) -> NodeRecord:
    record = state.node(node)
    if record is None:
        raise SchedulerError(f"local scheduler: unknown node {node!r}")
    return record
