"""A node dies under a job on the real Slurm lab cluster and Slurm requeues the job by itself
onto other nodes; the leading service stores the new attempt at once, but not yet the incident
of the attempt that was lost (its store refuses the decision: "database is locked"), and dies.
The standby that takes the lead must still blame the dead node for the lost attempt: what that
finding rests on (the lost attempt's nodes, when it ended) comes from the store, not from the
dead leader's memory. And the job log, read again from the offset held back for that finding,
must not give the new attempt the lost attempt's last reports as its progress.

Two services of this process on one SQLite store (the lock-file leadership ``serve`` uses),
each driven cycle by cycle so that the leader dies exactly between the two writes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from tests.slurm_lab import RecordingRunner, restore_cluster
from tests.waiting import wait

from trainmedic.core.detect.config import SMALL_JOB
from trainmedic.core.errors import StoreError
from trainmedic.core.model import Category
from trainmedic.demo.slurm_job import (
    TrainerJob,
    attempts_in_log,
    submit_trainer_job,
    trainer_job_spec,
)
from trainmedic.lab import SlurmCluster
from trainmedic.schedulers.slurm.scheduler import SlurmScheduler
from trainmedic.service.config.loader import default_config
from trainmedic.service.loop import Service
from trainmedic.store import Store, sqlite_url
from trainmedic.store.decisions import StoredDecision
from trainmedic.store.leader import leadership_for

pytestmark = [pytest.mark.slow, pytest.mark.slurm, pytest.mark.timeout(240)]


class RefusingStore(Store):
    """A real SQLite store whose decisions fail while ``refusing`` (a write lock held by
    someone else, a full disk): the finding stays with the service, tried again each cycle."""

    refusing = False

    def record_decision(self, *args: Any, **kwargs: Any) -> StoredDecision:
        if self.refusing:
            raise StoreError("record decision: database is locked")
        return super().record_decision(*args, **kwargs)


def _cycling(service: Service, what: str, check: Callable[[], Any], timeout: float) -> Any:
    """Run ``service``'s cycles until ``check`` holds."""

    def step() -> Any:
        service.cycle()
        return check()

    return wait(what, step, timeout, every=0.2)


@pytest.fixture
def cluster(slurm_cluster: SlurmCluster) -> Iterator[SlurmCluster]:
    restore_cluster(slurm_cluster)
    yield slurm_cluster
    restore_cluster(slurm_cluster)


def test_the_next_leader_blames_a_dead_node_slurm_requeued_the_job_for(
    cluster: SlurmCluster, tmp_path: Path
) -> None:
    base = default_config()
    config = dataclasses.replace(
        base,
        service=dataclasses.replace(base.service, poll_interval_s=0.2, state_dir=str(tmp_path)),
        detect=SMALL_JOB,
    )
    url = sqlite_url(str(tmp_path / "state.db"))
    store_a, store_b = RefusingStore(url), Store(url)
    slurm = SlurmScheduler(RecordingRunner(str(cluster.conf_path)))
    lead_a = leadership_for(store_a)
    a = Service(config, store_a, slurm, executor_id="a", leadership=lead_a)
    b = Service(config, store_b, slurm, executor_id="b", leadership=leadership_for(store_b))
    job = TrainerJob(run_dir=tmp_path / "run", nodes_dir=cluster.base / "nodes", name="takeover")
    job_id = submit_trainer_job(cluster, job)
    try:
        a.cycle()
        b.cycle()
        assert a.leading and not b.leading
        a.register(job_id, trainer_job_spec(cluster, job), name="takeover")
        _cycling(
            a,
            "attempt 0 training",
            lambda: (
                (attempts_in_log(job.output).get(0) or None) is not None
                and attempts_in_log(job.output)[0].first_iteration is not None
            ),
            90,
        )
        (first,) = store_a.list_attempts(job_id)
        dead = first.nodes[1]

        store_a.refusing = True
        cluster.run(["scontrol", "update", f"NodeName={dead}", "State=DOWN", "Reason=test"])

        def new_attempt_stored() -> Sequence[str] | None:
            attempts = store_a.list_attempts(job_id)
            return attempts[-1].nodes if len(attempts) > 1 and attempts[-1].nodes else None

        # Slurm requeues the job onto other nodes; the leader stores that at once, while the
        # lost attempt's finding waits in memory for the store.
        nodes = _cycling(a, "attempt 1 running elsewhere, stored", new_attempt_stored, 90)
        assert dead not in nodes
        assert store_a.list_incidents(job_id) == []
        assert a._unstored, "the leader made the node death's finding"

        lead_a.release()  # the leader dies (its memory with it)
        a.close()
        incident = _cycling(
            b,
            "the next leader's incident",
            lambda: next(iter(store_b.list_incidents(job_id)), None),
            60,
        )
        assert b.leading
        assert incident.attempt == first.attempt
        assert incident.category is Category.NODE_HARDWARE
        assert dead in incident.implicated.nodes
        # The lost attempt's last reports, read again from the held-back log offset, are
        # not the new attempt's progress: its first stored report is its own.
        resumed = _cycling(
            b,
            "attempt 1 training",
            lambda: (x := attempts_in_log(job.output).get(1)) and x.first_iteration and x,
            90,
        )
        stored = _cycling(
            b,
            "attempt 1's progress stored",
            lambda: next(
                (x for x in store_b.list_attempts(job_id) if x.attempt == 1 and x.first_iteration),
                None,
            ),
            30,
        )
        assert stored.first_iteration == resumed.first_iteration
    finally:
        a.close()
        b.close()
        cluster.run(["scancel", job_id], check=False)
        store_a.close()
        store_b.close()
