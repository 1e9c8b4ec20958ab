"""Accounting over a real SQLite store: checkpoints and attempt ends recorded by the service
loop (from real log lines and the in-memory scheduler), feedback, and the figures read back."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from trainmedic.core.accounting import account_job, scorecard
from trainmedic.core.model import Action, Advice, Category, Kind, Verdict
from trainmedic.core.states import JobState
from trainmedic.core.timestamps import iso_ms
from trainmedic.schedulers.fake import FakeScheduler
from trainmedic.service.config.sections import Config, ServiceConfig
from trainmedic.service.loop import Service
from trainmedic.store import AdviceMode, CheckpointSeen, JobSpec, NotFound, Store, sqlite_url
from trainmedic.store.facts import load_feedback, load_job_facts

CRASH = Verdict(failure=True, kind=Kind.CRASH, category=Category.GPU_HARDWARE, confidence=0.9)


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(sqlite_url(str(tmp_path / "tm.db")))


def test_checkpoints_go_to_the_attempt_running_then_and_earliest_time_wins(store: Store) -> None:
    store.register_job("j1", "local", now=0.0)
    store.record_attempt_start("j1", 0, started_at=1.0)
    store.record_checkpoints("j1", [CheckpointSeen(25, 10.0, begun=True)])
    store.record_checkpoints("j1", [CheckpointSeen(25, 12.5, begun=False)])
    store.record_checkpoints("j1", [CheckpointSeen(25, 13.0, begun=False)])  # the file, later
    store.record_attempt_start("j1", 1, started_at=50.0)
    # A restarted service re-reads attempt 0's lines: they stay attempt 0's.
    store.record_checkpoints(
        "j1", [CheckpointSeen(25, 10.0, begun=True), CheckpointSeen(50, 60.0, begun=False)]
    )
    rows = [(c.attempt, c.iteration, c.begun_at, c.saved_at) for c in store.list_checkpoints()]
    assert rows == [(0, 25, 10.0, 12.5), (1, 50, None, 60.0)]
    with pytest.raises(NotFound):
        store.record_checkpoints("nope", [CheckpointSeen(1, 1.0, begun=False)])


def test_feedback_is_kept_and_the_latest_counts(store: Store) -> None:
    store.register_job("j1", "local", now=0.0)
    incident = store.add_incident("j1", 0, CRASH, detected_at=5.0, fault_time=4.0)
    advice = store.put_advice(
        "j1",
        0,
        Advice(Action.RESTART_EXCLUDING, "x"),
        mode=AdviceMode.MONITOR,
        now=5.0,
        incident_id=incident,
    )
    store.add_feedback(advice.id, agree=False, action_taken="restart", now=6.0, by="ops")
    store.add_feedback(advice.id, agree=True, action_taken="restart_excluding", now=7.0)
    assert [f.agree for f in store.list_feedback(advice.id)] == [False, True]
    card = scorecard(load_feedback(store))
    (gpu,) = card.by_category
    assert (gpu.key, gpu.agreement, gpu.action_match) == ("gpu_hardware", 1.0, 1.0)
    with pytest.raises(NotFound):
        store.add_feedback(999, agree=True, action_taken="none", now=8.0)


def _progress(out: Path, iteration: int) -> None:
    with out.open("a") as f:
        f.write(
            f"{iso_ms(time.time())} [rank0] node=node1 iter={iteration} loss=0.5 "
            f"step_s=0.01000 compute_s=0.00800 wait_s=0.00100 samples_per_s=100.0\n"
        )


def _line(out: Path, text: str) -> None:
    with out.open("a") as f:
        f.write(f"{iso_ms(time.time())} [rank0] node=node1 {text}\n")


def test_service_loop_records_checkpoints_and_attempt_ends(tmp_path: Path, store: Store) -> None:
    out = tmp_path / "job.out"
    out.write_text("")
    config = Config(service=ServiceConfig(mode="monitor", state_dir=str(tmp_path)))
    sched = FakeScheduler()
    sched.add_job("7", ["node1", "node2"])
    service = Service(config, store, sched, executor_id="t")
    service.register("7", JobSpec(log_paths=(str(out),)))
    service.cycle()
    for i in range(1, 6):
        _progress(out, i)
        time.sleep(0.02)
    _line(out, "checkpoint begin iter=5")
    time.sleep(0.05)
    _line(out, "checkpoint saved iter=5 path=/ck/ckpt_00000005.pt")
    for i in range(6, 9):
        _progress(out, i)
        time.sleep(0.02)
    service.cycle()
    sched.set_state("7", JobState.FAILED)
    service.cycle()
    sched.requeue("7", ["node2"])
    service.cycle()
    _progress(out, 6)
    _progress(out, 7)
    service.cycle()

    first, second = store.list_attempts("7")
    assert first.end_state == "FAILED" and first.ended_at is not None
    assert second.ended_at is None and second.first_iteration == 6
    (ckpt,) = store.list_checkpoints("7")
    assert (ckpt.attempt, ckpt.iteration) == (0, 5)
    assert ckpt.begun_at is not None and ckpt.saved_at is not None
    assert ckpt.saved_at - ckpt.begun_at == pytest.approx(0.05, abs=0.04)

    (facts,) = load_job_facts(store, "7")
    account = account_job(facts, now=time.time())
    (gap,) = account.interruptions
    assert gap.category == "unattributed"  # no log line explained the failure
    assert (gap.resumed_from_iteration, gap.lost_basis, gap.lost_iterations) == (5, "checkpoint", 3)
    assert gap.shutdown_s is not None and gap.shutdown_s >= 0
    assert account.checkpoint_s == pytest.approx(ckpt.saved_at - ckpt.begun_at)
    assert sum(account.by_part().values()) == pytest.approx(account.wall_s)
