"""The store against a real PostgreSQL server (the session's throwaway server, see
tests.integration.pg_server)."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from collections.abc import Iterator

import pytest
from tests.integration.serve_helpers import wait

from trainmedic.core.model import Action, Advice, Category, Kind, Verdict
from trainmedic.store import (
    AdviceMode,
    AdviceStatus,
    InvalidTransition,
    JobSpec,
    JobStateChange,
    ProgressWrite,
    Store,
)

pytestmark = pytest.mark.slow


@pytest.fixture
def store(postgres_url: str) -> Iterator[Store]:
    store = Store(postgres_url)
    yield store
    store.close()


def test_jobs_and_attempts(store: Store) -> None:
    store.register_job("pg-j1", "slurm", now=1.0, spec=JobSpec(log_paths=("/a",)))
    store.register_job("pg-j1", "slurm", now=2.0, spec=JobSpec(log_paths=("/b",)))
    store.record_attempt_start("pg-j1", 0, started_at=3.0, nodes=["n1"])
    store.update_job_progress("pg-j1", state="RUNNING", progress_at=4.0, iteration=7)
    job = store.get_job("pg-j1")
    assert job is not None
    assert (job.registered_at, job.spec.log_paths, job.last_iteration) == (1.0, ("/b",), 7)
    assert store.list_attempts("pg-j1")[0].first_iteration == 7


def test_incidents_idempotent(store: Store) -> None:
    verdict = Verdict(failure=True, kind=Kind.HANG, category=Category.UNKNOWN, confidence=0.5)
    first = store.add_incident("pg-j2", 0, verdict, detected_at=1.0, fault_time=0.5)
    assert store.add_incident("pg-j2", 0, verdict, detected_at=2.0) == first
    assert store.get_incident(first).fault_time == 0.5


def test_concurrent_services_record_one_decision(store: Store) -> None:
    """Three processes' worth of writers re-deriving the same verdict at once: one incident,
    one advice, and exactly one of them told it wrote something new."""
    verdict = Verdict(failure=True, kind=Kind.CRASH, category=Category.UNKNOWN, confidence=0.4)
    barrier = threading.Barrier(3)
    results: list[bool] = []

    def writer() -> None:
        own = Store(store.url)
        barrier.wait()
        decided = own.record_decision(
            "pg-dec", 0, verdict, Advice(Action.RESTART, "x"), mode=AdviceMode.ACTION,
            now=1.0, detected_at=1.0,
        )  # fmt: skip
        results.append(decided.new)
        own.close()

    threads = [threading.Thread(target=writer) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert sorted(results) == [False, False, True]
    assert len(store.list_incidents("pg-dec")) == 1 and len(store.list_advice("pg-dec")) == 1


def test_advice_generations_claims_steps_transitions(store: Store) -> None:
    advice = Advice(Action.RESTART_EXCLUDING, "xid", ("n2",), ("n2",))
    ids = [
        store.put_advice("pg-j3", 0, advice, mode=AdviceMode.ACTION, now=float(i)).id
        for i in range(3)
    ]
    assert [store.get_advice(i).generation for i in ids] == [1, 2, 3]
    # Older pending generations were superseded; only the newest is active.
    assert [a.id for a in store.active_advice("pg-j3")] == [ids[-1]]

    targets = [
        store.put_advice(f"pg-c{i}", 0, advice, mode=AdviceMode.ACTION, now=1.0).id
        for i in range(10)
    ]
    wins: list[int] = []
    lock = threading.Lock()
    barrier = threading.Barrier(3)

    def claimer(name: str) -> None:
        own = Store(store.url)
        barrier.wait()
        for advice_id in targets:
            if own.claim_advice(advice_id, name):
                with lock:
                    wins.append(advice_id)
        own.close()

    threads = [threading.Thread(target=claimer, args=(f"t{i}",)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert sorted(wins) == targets

    target = targets[0]
    assert store.mark_step_done(target, "hold")
    assert not store.mark_step_done(target, "hold")
    with pytest.raises(InvalidTransition):
        store.set_advice_status(ids[0], AdviceStatus.CONVERGED, now=5.0)
    done = store.set_advice_status(target, AdviceStatus.CONVERGED, now=5.0)
    assert done.converged_at == 5.0 and done.steps_done == ("hold",)


def test_holds_and_node_history(store: Store) -> None:
    store.record_hold("pg-j4", held_at=1.0, by="t")
    assert "pg-j4" in [h.job_id for h in store.holds_older_than(2.0)]
    assert store.release_hold("pg-j4", released_at=3.0) == 1
    store.record_node_event("pg-n1", time=1.0, category=Category.NODE_HARDWARE, drained=True)
    assert store.node_history("pg-n1")[0].drained


def test_concurrent_generations_stay_unique(store: Store) -> None:
    barrier = threading.Barrier(3)
    errors: list[BaseException] = []

    def writer(name: str) -> None:
        own = Store(store.url)
        barrier.wait()
        try:
            for i in range(10):
                advice = Advice(Action.RESTART, name)
                own.put_advice("pg-gen", 0, advice, mode=AdviceMode.MONITOR, now=float(i))
        except BaseException as error:  # reported to the test thread below
            errors.append(error)
        own.close()

    threads = [threading.Thread(target=writer, args=(f"w{i}",)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert errors == []
    assert [a.generation for a in store.list_advice("pg-gen")] == list(range(1, 31))


def test_advisory_lock_elects_one_leader_and_kill_9_frees_it(postgres_url: str) -> None:
    from trainmedic.store.leader import AdvisoryLockLeadership, leadership_for

    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time\n"
            "from trainmedic.store import Store\n"
            "from trainmedic.store.leader import leadership_for\n"
            f"lead = leadership_for(Store({postgres_url!r}))\n"
            "assert lead.hold()\n"
            "print('held', flush=True)\n"
            "time.sleep(120)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    b = Store(postgres_url)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        lead_b = leadership_for(b)
        assert isinstance(lead_b, AdvisoryLockLeadership)
        assert not lead_b.hold()
        holder.send_signal(signal.SIGKILL)  # the leader dies mid-flight
        holder.wait(10)
        assert wait("the lead freed by the kill", lead_b.hold, 10)
        assert lead_b.hold()
        assert not leadership_for(Store(postgres_url)).hold()  # a third one stands by
        lead_b.release()
        assert wait("the lead released", leadership_for(Store(postgres_url)).hold, 10)
    finally:
        holder.kill()
        b.close()


def test_checkpoints_and_feedback_for_the_accounting(store: Store) -> None:
    from trainmedic.core.accounting import account_job
    from trainmedic.store import CheckpointSeen
    from trainmedic.store.facts import load_feedback, load_job_facts

    store.register_job("pg-acc", "slurm", now=0.0)
    store.record_attempt_start("pg-acc", 0, started_at=1.0, nodes=["n1"])
    store.update_job_progress("pg-acc", state="RUNNING", progress_at=2.0, iteration=0)
    store.record_checkpoints(
        "pg-acc", [CheckpointSeen(10, 5.0, True), CheckpointSeen(10, 6.0, False)]
    )
    store.record_checkpoints("pg-acc", [CheckpointSeen(10, 7.0, False)])  # later: kept earliest
    store.update_job_progress("pg-acc", progress_at=12.0, iteration=10)
    (ckpt,) = store.list_checkpoints("pg-acc")
    assert (ckpt.attempt, ckpt.begun_at, ckpt.saved_at) == (0, 5.0, 6.0)
    (facts,) = load_job_facts(store, "pg-acc")
    assert account_job(facts, now=12.0).checkpoint_s == 1.0
    verdict = Verdict(failure=True, kind=Kind.CRASH, category=Category.STORAGE, confidence=0.7)
    incident = store.add_incident("pg-acc", 0, verdict, detected_at=13.0)
    advice = store.put_advice(
        "pg-acc",
        0,
        Advice(Action.RESTART, "x"),
        mode=AdviceMode.MONITOR,
        now=13.0,
        incident_id=incident,
    )
    store.add_feedback(advice.id, agree=True, action_taken="restart", now=14.0, by="ops")
    (answer,) = load_feedback(store)
    assert (answer.category, answer.agree) == (Category.STORAGE, True)


def test_a_cycles_progress_and_state_changes_in_one_write_each(store: Store) -> None:
    """``record_job_states`` and ``record_progress`` (executemany with a correlated
    subquery) on PostgreSQL: the same rows as the calls one by one."""
    jobs = [f"pg-b{i}" for i in range(3)]
    for job_id in jobs:
        store.register_job(job_id, "slurm", now=1.0)
    store.record_job_states(
        [JobStateChange(j, "RUNNING", 0, 2.0, nodes=("n1",), started=True) for j in jobs]
    )
    store.record_progress(
        [ProgressWrite(j, progress_at=3.0 + i, iteration=10 * i) for i, j in enumerate(jobs)]
        + [ProgressWrite(jobs[0], progress_at=9.0, iteration=99)]
        + [ProgressWrite(jobs[1], checkpoint_iteration=5, checkpoint_at=8.0)]
    )
    store.record_job_states([JobStateChange(jobs[2], "FAILED", 0, 10.0, ended=(0, "FAILED"))])
    got = {
        j.job_id: (j.state, j.last_iteration, j.last_checkpoint_iteration)
        for j in store.list_jobs()
        if j.job_id in jobs
    }
    assert got == {
        "pg-b0": ("RUNNING", 99, None),
        "pg-b1": ("RUNNING", 10, 5),
        "pg-b2": ("FAILED", 20, None),
    }
    first = store.list_attempts("pg-b0")[0]
    assert (first.first_iteration, first.last_iteration, first.nodes) == (0, 99, ("n1",))
    assert store.list_attempts("pg-b2")[0].end_state == "FAILED"
