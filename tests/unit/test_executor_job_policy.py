"""A job's own policy means the same to the executor as to the policy: its
``stop_enforcement`` (Slurm comment, POST /jobs) decides whether a stop is carried out. A job
may only turn it on: opting out under an operator's ``stop_enforcement = true`` keeps the
operator's setting (service.decisions)."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import pytest

from trainmedic.core.model import Action, Advice, Category, Kind, Verdict
from trainmedic.core.states import JobState
from trainmedic.schedulers.fake import FakeScheduler
from trainmedic.service.config.sections import Config, ServiceConfig
from trainmedic.service.loop import Service
from trainmedic.store import AdviceMode, AdviceStatus, JobSpec, Store, sqlite_url

APP_ERROR = Verdict(True, Kind.CRASH, Category.APPLICATION, 0.9)


@pytest.mark.parametrize(("configured", "per_job"), [(False, True), (True, False)])
def test_the_jobs_stop_enforcement_is_what_the_executor_enforces(
    tmp_path: Path, configured: bool, per_job: bool
) -> None:
    base = Config(service=ServiceConfig(mode="action", state_dir=str(tmp_path)))
    config = dataclasses.replace(
        base, policy=dataclasses.replace(base.policy, stop_enforcement=configured)
    )
    store = Store(sqlite_url(str(tmp_path / "state.db")))
    (tmp_path / "job.out").write_text("")
    sched = FakeScheduler()
    sched.add_job("7", ["node1", "node2"], JobState.RUNNING)
    service = Service(config, store, sched, executor_id="e1")
    spec = JobSpec(log_paths=(str(tmp_path / "job.out"),), policy={"stop_enforcement": per_job})
    service.register("7", spec)
    enforced = configured or per_job  # a job's opt-in only tightens
    assert service.decisions.policy_for("7").stop_enforcement is enforced
    # the advice the policy gives a deterministic error under the job's own policy
    incident = store.add_incident("7", 0, APP_ERROR, detected_at=time.time())
    advice = store.put_advice(
        "7",
        0,
        Advice(Action.STOP, "stop: same failure"),
        mode=AdviceMode.ACTION,
        now=time.time(),
        incident_id=incident,
    )
    service.cycle()
    service.cycle()
    cancelled = ("cancel", "7") in [c[:2] for c in sched.calls]
    assert cancelled is enforced
    assert sched.jobs["7"].state is (JobState.CANCELLED if enforced else JobState.RUNNING)
    assert store.get_advice(advice.id).status is AdviceStatus.CONVERGED
