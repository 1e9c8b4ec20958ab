"""GPU telemetry on the real Slurm lab: each virtual node's DCGM-exporter stand-in
(``trainmedic.lab.telemetry``) is scraped by the real service for the nodes of a running
2-node trainer job, configured as a user would (``[telemetry] dcgm_urls``).

An Xid 79 that one node's exporter reports becomes a ``gpu_hardware`` incident on that node
with telemetry evidence; a node whose endpoint does not answer is "unknown" and raises nothing.
Monitor mode: the test changes nothing on the shared cluster (and puts the Xid back to 0).
"""

from __future__ import annotations

import dataclasses
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from tests.waiting import wait

from trainmedic.core.detect import SMALL_JOB
from trainmedic.core.model import Category, EvidenceSource, Kind
from trainmedic.core.states import JobState
from trainmedic.core.telemetry import XID
from trainmedic.demo.slurm_job import (
    TrainerJob,
    attempts_in_log,
    submit_trainer_job,
    trainer_job_spec,
)
from trainmedic.lab import SlurmCluster
from trainmedic.schedulers.slurm.runner import LocalRunner
from trainmedic.schedulers.slurm.scheduler import SlurmScheduler
from trainmedic.service.config.loader import default_config
from trainmedic.service.config.sections import TelemetryConfig
from trainmedic.service.loop import Service
from trainmedic.store import Store, sqlite_url

pytestmark = [pytest.mark.slow, pytest.mark.slurm, pytest.mark.timeout(240)]

GOOD, DEAD = "node1", "node2"
GPU = 1


def dead_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}/metrics"


def test_xid79_in_a_nodes_telemetry_is_gpu_hardware_and_a_dead_endpoint_is_unknown(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    cluster = slurm_cluster
    cluster.set_gpu_metric(GOOD, GPU, XID, 0)
    base = default_config({"HOME": str(tmp_path)})
    config = dataclasses.replace(
        base,
        service=dataclasses.replace(base.service, state_dir=str(tmp_path), poll_interval_s=0.3),
        detect=SMALL_JOB,
        telemetry=TelemetryConfig(
            dcgm_urls={GOOD: cluster.telemetry_url(GOOD), DEAD: dead_url()},
            scrape_interval_s=1.0,
            timeout_s=1.0,
        ),
    )
    store = Store(sqlite_url(str(tmp_path / "state.db")))
    service = Service(config, store, SlurmScheduler(LocalRunner(str(cluster.conf_path))))
    stop = threading.Event()
    loop = threading.Thread(target=service.run, args=(stop,), daemon=True)
    loop.start()
    job = TrainerJob(run_dir=tmp_path / "run", nodes_dir=cluster.base / "nodes", name="dcgm")
    job_id = submit_trainer_job(cluster, job, extra=[f"--nodelist={GOOD},{DEAD}"])
    try:
        service.register(job_id, trainer_job_spec(cluster, job), name="dcgm")
        wait(
            "the job training",
            lambda: (a := attempts_in_log(job.output).get(0)) and a.first_iteration is not None,
            90,
        )
        wait("a baseline scrape of both nodes", lambda: _status(service, job_id, DEAD), 30)
        time.sleep(2.0)  # a few scrapes: the baseline is in the engine
        status = _status(service, job_id, DEAD)
        assert status is not None and status.status == "unknown", status
        assert _status(service, job_id, GOOD).status == "up"  # type: ignore[union-attr]
        assert store.list_incidents(job_id) == [], "a dead endpoint is no failure"

        cluster.set_gpu_metric(GOOD, GPU, XID, 79)
        (incident,) = wait("the incident", lambda: store.list_incidents(job_id), 60)
        assert (incident.kind, incident.category) == (Kind.CRASH, Category.GPU_HARDWARE)
        assert incident.implicated.nodes == (GOOD,)
        telemetry = [e for e in incident.evidence if e.evidence is EvidenceSource.GPU_TELEMETRY]
        assert [(e.signature, e.node, e.xid, e.gpu) for e in telemetry] == [
            ("dcgm.xid", GOOD, 79, str(GPU))
        ]
        assert incident.root_cause is not None and incident.root_cause.signature == "dcgm.xid"
        assert service.sources.of_job(job_id), "source status is published"
        assert store.get_job(job_id).state == JobState.RUNNING.value  # type: ignore[union-attr]
    finally:
        stop.set()
        loop.join(timeout=15)
        cluster.run(["scancel", job_id], check=False)
        cluster.set_gpu_metric(GOOD, GPU, XID, 0)
        store.close()


def _status(service: Service, job_id: str, node: str) -> Any:
    for status in service.sources.of_job(job_id):
        if status.source == f"dcgm:{node}":
            return status
    return None
