"""The local scheduler's state file (schedulers/local/statefile.py): what a transaction reads,
when it writes, and how bad state reaches the caller (files only, no processes)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from trainmedic.core.errors import SchedulerError
from trainmedic.schedulers.local.state import JobRecord, LocalJobSpec, NodeRecord
from trainmedic.schedulers.local.statefile import ClusterStateFile, require_job, require_node

SPEC = LocalJobSpec(name="j", nnodes=1, nproc_per_node=1, command=("-c", "pass"), run_dir="/r")


def test_a_new_directory_reads_as_an_empty_cluster(tmp_path: Path) -> None:
    with ClusterStateFile(tmp_path).transaction() as state:
        assert (state.nodes, state.jobs, state.next_job) == ((), {}, 1)
    assert not (tmp_path / "state.json").exists()  # reading writes nothing


def test_put_writes_a_changed_job_and_nothing_for_an_unchanged_one(tmp_path: Path) -> None:
    store = ClusterStateFile(tmp_path)
    job = JobRecord(job_id="1", spec=SPEC, submitted_at=1.0)
    with store.transaction() as state:
        state = store.put(state, job)
    # Each save replaces the file (write_atomic): a new inode says it was written.
    written = store.path.stat().st_ino
    with store.transaction() as state:
        assert state.jobs["1"] == job
        assert store.put(state, job) is state  # unchanged (poll runs often): no write
        assert store.path.stat().st_ino == written
        store.put(state, dataclasses.replace(job, reason="x"))
        assert store.path.stat().st_ino != written
    with store.transaction() as state:
        assert state.jobs["1"].reason == "x"


def test_set_node_replaces_only_that_node(tmp_path: Path) -> None:
    store = ClusterStateFile(tmp_path)
    with store.transaction() as state:
        store.save(dataclasses.replace(state, nodes=(NodeRecord("a"), NodeRecord("b"))))
    with store.transaction() as state:
        store.set_node(state, NodeRecord("b", drain=True, reason="trainmedic: x"))
    with store.transaction() as state:
        assert require_node(state, "a") == NodeRecord("a")
        assert require_node(state, "b").drain


def test_corrupt_state_and_unknown_names_are_scheduler_errors(tmp_path: Path) -> None:
    store = ClusterStateFile(tmp_path)
    with store.transaction() as state:
        with pytest.raises(SchedulerError, match="unknown job '9'"):
            require_job(state, "9")
        with pytest.raises(SchedulerError, match="unknown node 'x'"):
            require_node(state, "x")
    store.path.write_text("{not json")
    with pytest.raises(SchedulerError, match="corrupt state"), store.transaction():
        pass
