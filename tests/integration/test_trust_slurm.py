"""Trust on the real Slurm lab cluster (munge + slurmctld + 4 slurmd), the real service loop
in a thread, a real SQLite store, every Slurm command it issues recorded:

- a job that prints a fake Xid naming its node, and opts in with a loosened policy in its
  Slurm comment, gets its node excluded from its own restart, never drained, never charged;
- the ``idle*`` (NOT_RESPONDING) second after an operator's ``scontrol update state=resume``
  is not evidence against the next job that lands on that node.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest
from tests.slurm_lab import RecordingRunner, ServiceThread, restore_cluster
from tests.waiting import wait

from trainmedic.core.model import Category
from trainmedic.core.states import NodeState
from trainmedic.lab import SlurmCluster
from trainmedic.schedulers.base import ClusterSnapshot
from trainmedic.schedulers.slurm.runner import LocalRunner
from trainmedic.schedulers.slurm.scheduler import SlurmScheduler
from trainmedic.service.config.loader import default_config
from trainmedic.service.config.sections import Config
from trainmedic.service.loop import Service
from trainmedic.store import AdviceRecord, IncidentRecord, JobSpec, Store, sqlite_url

pytestmark = [pytest.mark.slow, pytest.mark.slurm, pytest.mark.timeout(240)]

XID = "NVRM: Xid (PCI:0000:5e:00): 79, pid=1, name=python, GPU has fallen off the bus."


class WatchedSlurm(SlurmScheduler):
    """The real adapter, remembering every node state its polls returned."""

    def __init__(self, runner: LocalRunner) -> None:
        super().__init__(runner)
        self.seen: list[tuple[float, str, NodeState]] = []

    def poll(self, job_ids: Sequence[str] = ()) -> ClusterSnapshot:
        snapshot = super().poll(job_ids)
        self.seen.extend((snapshot.time, n.name, n.state) for n in snapshot.nodes)
        return snapshot


class Running:
    def __init__(self, cluster: SlurmCluster, tmp: Path, config: Config) -> None:
        self.cluster = cluster
        self.runner = RecordingRunner(str(cluster.conf_path))
        self.slurm = WatchedSlurm(self.runner)
        self.store = Store(sqlite_url(str(tmp / "state.db")))
        kernel = {n: str(cluster.kernel_log(n)) for n in cluster.nodes}
        self.service = Service(config, self.store, self.slurm, executor_id="t", kernel_logs=kernel)
        self._running = ServiceThread(self.service)

    def incident(self, job_id: str, timeout: float = 60) -> IncidentRecord:
        found: list[IncidentRecord] = wait(
            f"an incident of job {job_id}", lambda: self.store.list_incidents(job_id), timeout
        )
        return found[0]

    def advice(self, incident: IncidentRecord) -> AdviceRecord:
        def of_incident() -> AdviceRecord | None:
            return next(
                (
                    a
                    for a in self.store.list_advice(incident.job_id)
                    if a.incident_id == incident.id
                ),
                None,
            )

        found: AdviceRecord = wait(f"advice for incident {incident.id}", of_incident, 30)
        return found

    def drains_issued(self) -> list[tuple[str, ...]]:
        return [c for c in self.runner.changes if any("State=DRAIN" in a for a in c)]

    def close(self) -> None:
        self._running.stop()
        self.store.close()


@pytest.fixture
def running(slurm_cluster: SlurmCluster, tmp_path: Path) -> Iterator[Callable[[Config], Running]]:
    restore_cluster(slurm_cluster)
    made: list[Running] = []

    def make(config: Config) -> Running:
        made.append(Running(slurm_cluster, tmp_path, config))
        return made[-1]

    yield make
    for one in made:
        one.close()
    slurm_cluster.run(["scancel", "--user", "root"], check=False)
    restore_cluster(slurm_cluster)


def _config(cluster: SlurmCluster, mode: str) -> Config:
    base = default_config()
    template = str(cluster.kernel_log("node1")).replace("node1", "{node}")
    slurm = dataclasses.replace(
        base.scheduler.slurm,
        slurm_conf=str(cluster.conf_path),
        kernel_log_template=template,
        discovery_interval_s=0.5,
    )
    return dataclasses.replace(
        base,
        service=dataclasses.replace(base.service, mode=mode, poll_interval_s=0.1),  # type: ignore[arg-type]
        scheduler=dataclasses.replace(base.scheduler, kind="slurm", slurm=slurm),
    )


def test_a_fake_xid_in_job_output_with_a_loosening_comment_drains_nothing(
    slurm_cluster: SlurmCluster,
    tmp_path: Path,
    running: Callable[[Config], Running],
    caplog: pytest.LogCaptureFixture,
) -> None:
    lab = running(_config(slurm_cluster, "action"))
    # The job opts in and asks for one incident to make a repeat offender of its node.
    comment = json.dumps({"trainmedic": {"repeat_offender_count": 1, "drain_enabled": True}})
    script = f'sleep 6; echo "$SLURMD_NODENAME: {XID}"; sleep 1; exit 1'
    job_id = slurm_cluster.sbatch(
        ["-N1", f"--output={tmp_path / 'xid.out'}", f"--comment={comment}", "--wrap", script]
    )
    incident = lab.incident(job_id)
    assert incident.category is Category.GPU_HARDWARE
    (node,) = incident.implicated.nodes
    advice = lab.advice(incident)
    # Its own restart leaves the node its output named; nobody else's work is touched.
    assert advice.exclude_nodes == (node,) and advice.drain_nodes == ()
    assert "only the job's own output" in advice.basis
    time.sleep(2)  # more cycles: the executor acts on the advice
    assert lab.drains_issued() == []
    assert lab.store.node_history() == []
    drained = {n.name for n in lab.slurm.poll(()).nodes if n.drain}
    assert drained == set()
    assert f"job {job_id} comment: 'policy.repeat_offender_count' is the operator's" in caplog.text


def test_the_resume_blip_is_no_evidence_against_the_next_attempt_on_the_node(
    slurm_cluster: SlurmCluster, tmp_path: Path, running: Callable[[Config], Running]
) -> None:
    lab = running(_config(slurm_cluster, "monitor"))
    node = "node3"
    # Attempt 0 trains on node3; attempt 1 (after Slurm's own requeue) fails by itself.
    script = 'if [ -n "$SLURM_RESTART_COUNT" ]; then sleep 4; exit 3; else sleep 300; fi'
    # No output file: slurmstepd's "CANCELLED DUE TO NODE FAILURE" line of attempt 0 would
    # be evidence in it (keeping earlier attempts' lines out is another matter).
    args = ["-N1", f"-w{node}", "--requeue", "--output=/dev/null"]
    job_id = slurm_cluster.sbatch([*args, "--wrap", script])
    kernel = {n: str(slurm_cluster.kernel_log(n)) for n in slurm_cluster.nodes}
    lab.service.register(job_id, JobSpec(kernel_logs=kernel))
    wait("attempt 0 running", lambda: lab.store.list_attempts(job_id), 30)

    # The operator takes node3 down (Slurm requeues the job: a real node failure) ...
    slurm_cluster.run(["scontrol", "update", f"NodeName={node}", "State=DOWN", "Reason=ops"])
    down = lab.incident(job_id)
    assert down.attempt == 0 and down.category is Category.NODE_HARDWARE
    time.sleep(11)  # the requeued job may start again (cred_expire)
    # ... and resumes it: about a second of idle* (NOT_RESPONDING) until slurmd registers,
    # then attempt 1 starts there and fails on its own.
    resumed = time.time()
    slurm_cluster.run(["scontrol", "update", f"NodeName={node}", "State=RESUME"])
    wait(
        "attempt 1 running",
        lambda: any(a.attempt == 1 for a in lab.store.list_attempts(job_id)),
        40,
    )
    assert any(
        t >= resumed and name == node and state is NodeState.NOT_RESPONDING
        for t, name, state in lab.slurm.seen
    ), "no service poll landed in the idle* second after the resume: nothing was tested"

    second = wait(
        "the incident of attempt 1",
        lambda: next((i for i in lab.store.list_incidents(job_id) if i.attempt == 1), None),
        60,
    )
    advice = lab.advice(second)
    assert second.category is not Category.NODE_HARDWARE, second.basis
    assert node not in second.implicated.nodes
    assert advice.drain_nodes == () and advice.exclude_nodes == ()
