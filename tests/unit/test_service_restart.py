"""A service restarted after ``kill -9`` reaches the incident it would have reached, acts on
it once, and a second restart changes nothing (real SQLite store and kernel-log files, the
in-memory scheduler)."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path

from trainmedic.core.model import Action, Category
from trainmedic.core.states import JobState
from trainmedic.schedulers.fake import FakeScheduler
from trainmedic.service.config.sections import Config, ServiceConfig
from trainmedic.service.loop import Service
from trainmedic.store import JobSpec, Store, sqlite_url

SETTLE_S = 0.6  # past the engine's settle time, so findings are attributed


def _service(config: Config, store: Store, sched: FakeScheduler) -> Service:
    return Service(config, store, sched, executor_id="restarted")


def _decide(service: Service) -> list[tuple[int, Category, tuple[str, ...], Action, bool]]:
    service.cycle()
    time.sleep(SETTLE_S)
    return [
        (
            d.incident_id,
            d.finding.verdict.category,
            d.finding.verdict.implicated.nodes,
            d.advice.action,
            d.new,
        )
        for d in service.cycle().decisions
    ]


def test_a_job_that_failed_while_the_service_was_down_keeps_its_hardware_verdict(
    tmp_path: Path,
) -> None:
    config = Config(service=ServiceConfig(mode="action", state_dir=str(tmp_path)))
    store = Store(sqlite_url(str(tmp_path / "state.db")))
    kernel = {n: tmp_path / f"{n}.kern.log" for n in ("node1", "node2")}
    for path in kernel.values():
        path.write_text("")
    (tmp_path / "job.out").write_text("")
    spec = JobSpec(
        log_paths=(str(tmp_path / "job.out"),),
        kernel_logs={n: str(p) for n, p in kernel.items()},
    )
    store.register_job("7", "fake", now=time.time(), spec=spec)
    sched = FakeScheduler()
    sched.add_job("7", ["node1", "node2"])
    _service(config, store, sched).cycle()  # sees attempt 0 running, then is killed
    assert [a.nodes for a in store.list_attempts("7")] == [("node1", "node2")]

    # While no service runs, node2's GPU falls off the bus and the job fails.
    stamp = datetime.now(UTC).isoformat()
    with kernel["node2"].open("a") as f:
        f.write(
            f"{stamp} node2 kernel: NVRM: Xid (PCI:0000:5e:00): 79, pid=9244, name=python, "
            "GPU has fallen off the bus.\n"
        )
    sched.set_state("7", JobState.FAILED)

    # The restarted service no longer sees the job running on node2, yet the attempt's nodes
    # come back from the store: the verdict is the Xid's, and the restart leaves node2 out.
    (decision,) = _decide(_service(config, store, sched))
    incident, category, nodes, action, new = decision
    assert (category, nodes, action, new) == (
        Category.GPU_HARDWARE,
        ("node2",),
        Action.RESTART_EXCLUDING,
        True,
    )
    assert sched.calls == [("drain", "node2"), ("requeue", "7", "node2")]  # a strong Xid
    assert "node2" not in sched.jobs["7"].nodes and sched.jobs["7"].attempt == 1

    # A second restart re-reads the same logs: nothing new is stored and nothing is redone.
    again = _decide(_service(config, store, sched))
    assert all(not d[4] for d in again)
    assert [i.id for i in store.list_incidents("7")] == [incident]
    assert len(store.list_advice("7")) == 1
    assert len(sched.calls) == 2
