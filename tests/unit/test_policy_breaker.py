"""The drain circuit breaker: counts every drain of the cycle, cluster-wide; once tripped it
stays tripped (advice only), across restarts, until an operator resets it (pure gate, then the
service over a real SQLite store)."""

from __future__ import annotations

import dataclasses
import time
from datetime import UTC, datetime
from pathlib import Path

from trainmedic.core.policy.breaker import gate_drains
from trainmedic.core.policy.config import PolicyConfig
from trainmedic.core.policy.context import PolicyContext
from trainmedic.core.states import JobState
from trainmedic.schedulers.fake import FakeScheduler
from trainmedic.service.config.sections import Config, ServiceConfig
from trainmedic.service.loop import Service
from trainmedic.store import JobSpec, Store, sqlite_url

XID79 = "NVRM: Xid (PCI:0000:5e:00): 79, pid=9244, name=python, GPU has fallen off the bus."
NODES = tuple(f"n{i}" for i in range(1, 11))  # 10 nodes, 25 %: two drains per window


def _context(**changes: object) -> PolicyContext:
    return dataclasses.replace(PolicyContext(job_id="j", cluster_size=10), **changes)  # type: ignore[arg-type]


def test_the_gate_drains_up_to_the_limit_then_trips() -> None:
    assert gate_drains(("n1", "n2"), _context()).drain == ("n1", "n2")
    gate = gate_drains(("n1", "n2"), _context(recent_drains=1))
    assert (gate.drain, gate.held, gate.trips) == (("n1",), ("n2",), True)
    assert "trips" in gate.note and "n2 excluded only" in gate.note


def test_a_tripped_breaker_holds_every_drain_whatever_the_window_says() -> None:
    gate = gate_drains(("n1",), _context(breaker_tripped=True))
    assert (gate.drain, gate.held, gate.trips) == ((), ("n1",), False)
    assert "advice only until an operator resets it" in gate.note


def test_an_unknown_cluster_size_holds_without_tripping() -> None:
    gate = gate_drains(("n1",), _context(cluster_size=0))
    assert (gate.drain, gate.trips) == ((), False)
    assert gate_drains(("n1",), _context(cluster_size=None)).drain == ("n1",), "analyze"


# -- the service over a real SQLite store ---------------------------------------------------


class Cluster:
    def __init__(self, tmp_path: Path) -> None:
        self.tmp = tmp_path
        self.config = Config(
            service=ServiceConfig(mode="action", state_dir=str(tmp_path)),
            policy=PolicyConfig(max_drain_fraction=0.25),
        )
        self.store = Store(sqlite_url(str(tmp_path / "state.db")))
        self.sched = FakeScheduler(NODES)
        self.kernel = {n: tmp_path / f"{n}.kern.log" for n in NODES}
        for path in self.kernel.values():
            path.touch()
        self.service = self.restart()

    def restart(self) -> Service:
        self.service = Service(self.config, self.store, self.sched, executor_id="breaker")
        return self.service

    def run(self, job_id: str, nodes: tuple[str, str]) -> None:
        out = self.tmp / f"{job_id}.out"
        out.touch()
        spec = JobSpec(
            log_paths=(str(out),), kernel_logs={n: str(p) for n, p in self.kernel.items()}
        )
        self.service.register(job_id, spec)
        self.sched.add_job(job_id, nodes)

    def xid(self, job_id: str) -> None:
        """The first node of the job loses its GPU (its kernel log says so), the job fails."""
        node = self.sched.jobs[job_id].nodes[0]
        with self.kernel[node].open("a") as f:
            f.write(f"{datetime.now(UTC).isoformat()} {node} kernel: {XID79}\n")
        self.sched.set_state(job_id, JobState.FAILED)

    def decide(self) -> None:
        self.service.cycle()
        time.sleep(0.6)  # past the engine's settle time
        self.service.cycle()

    def drained(self) -> list[str]:
        return [call[1] for call in self.sched.calls if call[0] == "drain"]


def test_drains_of_one_cycle_count_and_the_trip_survives_a_restart(tmp_path: Path) -> None:
    lab = Cluster(tmp_path)
    jobs = {"a": ("n1", "n2"), "b": ("n3", "n4"), "c": ("n5", "n6")}
    for job_id, nodes in jobs.items():
        lab.run(job_id, nodes)
    lab.service.cycle()  # every job seen running
    for job_id in jobs:
        lab.xid(job_id)  # three GPUs lost at once: three decisions in one cycle
    lab.decide()
    assert sorted(lab.drained()) == ["n1", "n3"], lab.sched.calls
    (held,) = lab.store.list_advice("c")
    assert held.exclude_nodes == ("n5",) and held.drain_nodes == ()
    assert "drain circuit breaker trips" in held.basis
    state = lab.store.breaker_state()
    assert state.tripped and "incident" in state.reason and "job c" in state.reason

    # A restarted service keeps it tripped: one more lost GPU is advice only, whatever the
    # window says (a lower count would allow it).
    lab.restart()
    lab.run("d", ("n7", "n8"))
    lab.service.cycle()
    lab.xid("d")
    lab.decide()
    (advice,) = lab.store.list_advice("d")
    assert advice.exclude_nodes == ("n7",) and advice.drain_nodes == ()
    assert "drain circuit breaker tripped" in advice.basis
    assert sorted(lab.drained()) == ["n1", "n3"]

    # The operator resets it: drains resume and the count starts afresh.
    was, state = lab.store.reset_breaker(now=time.time(), by="test")
    assert was and not state.tripped and state.reset_by == "test"
    assert lab.store.reset_breaker(now=time.time(), by="test")[0] is False
    lab.run("e", ("n9", "n10"))
    lab.service.cycle()
    lab.xid("e")
    lab.decide()
    (advice,) = lab.store.list_advice("e")
    assert advice.drain_nodes == ("n9",) and not lab.store.breaker_state().tripped
    assert sorted(lab.drained()) == ["n1", "n3", "n9"]
    lab.store.close()
