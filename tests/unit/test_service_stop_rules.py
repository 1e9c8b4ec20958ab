"""The stop rules hold with a workload's own resume, checkpoint and config lines: the service
(real SQLite store, the in-memory scheduler) reads what tests/workloads/kvtrainer.py printed
in two attempts (tests/data/workloads/kvtrainer_app_error: rank 1 raises at iteration 120 in
both; the second resumed from checkpoint 100 with ``event=resume ... iter=100``), retries the
first failure once and stops the second: the same failure at the same iteration."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

from trainmedic.core.model import Action, Category
from trainmedic.core.states import JobState
from trainmedic.schedulers.fake import FakeScheduler
from trainmedic.service.config.sections import Config, ServiceConfig
from trainmedic.service.decisions import Decision
from trainmedic.service.loop import Service
from trainmedic.store import JobSpec, Store, sqlite_url

DATA = Path(__file__).resolve().parents[1] / "data" / "workloads" / "kvtrainer_app_error"
FIRST_LINE_OF_ATTEMPT_1 = {"job.out": 487, "job.err": 90}


def _append_attempt(tmp: Path, attempt: int) -> None:
    for name, cut in FIRST_LINE_OF_ATTEMPT_1.items():
        lines = (DATA / name).read_text().splitlines(keepends=True)
        part = lines[: cut - 1] if attempt == 0 else lines[cut - 1 :]
        with (tmp / name).open("a") as out:
            out.write("".join(part))


def _fail_and_decide(service: Service, sched: FakeScheduler) -> Decision:
    service.cycle()  # reads the attempt's lines while the job still runs
    sched.set_state("7", JobState.FAILED)
    decisions: list[Decision] = []
    deadline = time.monotonic() + 10
    while not decisions and time.monotonic() < deadline:
        time.sleep(0.3)
        decisions = service.cycle().decisions
    (decision,) = decisions
    return decision


def test_a_deterministic_error_is_retried_once_then_stopped(tmp_path: Path) -> None:
    base = Config(service=ServiceConfig(mode="action", state_dir=str(tmp_path)))
    config = dataclasses.replace(
        base, policy=dataclasses.replace(base.policy, stop_enforcement=True)
    )
    store = Store(sqlite_url(str(tmp_path / "state.db")))
    for name in FIRST_LINE_OF_ATTEMPT_1:
        (tmp_path / name).write_text("")
    sched = FakeScheduler()
    sched.add_job("7", ["node1", "node2"])
    service = Service(config, store, sched, executor_id="e1")
    spec = JobSpec(log_paths=(str(tmp_path / "job.out"), str(tmp_path / "job.err")))
    service.register("7", spec)
    service.cycle()  # attempt 0 runs

    _append_attempt(tmp_path, 0)
    first = _fail_and_decide(service, sched)
    assert first.finding.verdict.category is Category.APPLICATION
    assert first.advice.action in (Action.RESTART, Action.RESTART_EXCLUDING)
    assert sched.jobs["7"].attempt == 1  # requeued once

    service.cycle()  # attempt 1 runs
    _append_attempt(tmp_path, 1)
    second = _fail_and_decide(service, sched)
    attempts = {a.attempt: a for a in store.list_attempts("7")}
    # the resume line (iter=100) is no step, nor the error message's "iteration 120"
    assert (attempts[1].first_iteration, attempts[1].last_iteration) == (101, 119)
    assert attempts[0].last_iteration == 119
    assert second.advice.action is Action.STOP, second.advice.basis
    assert "same failure at iteration 119 as attempt 0" in second.advice.basis
    service.cycle()
    assert [c for c in sched.calls if c[0] in ("requeue", "cancel")] == [
        ("requeue", "7", *first.advice.exclude_nodes),
        ("cancel", "7"),
    ]
