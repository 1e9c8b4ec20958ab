"""kill -9 of the service during an incident, then a restart: no action applied twice, no
incident lost, the job not left stopped. Real `trainmedic serve` processes, the real local
backend with torchrun/gloo workers, SQLite shared through the state directory."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.waiting import wait

from trainmedic.core.states import JobState
from trainmedic.schedulers.local.scheduler import LocalJobSpec, LocalScheduler
from trainmedic.store import Store, sqlite_url

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]
TOKEN = "kill9-token"
NODES = ("node1", "node2", "node3", "node4")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait(what: str, check: Callable[[], Any], timeout: float = 90.0) -> Any:
    # The shared wait with these tests' longer default (test_service_failover imports it).
    return wait(what, check, timeout)


def _serve(config: Path, log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "trainmedic.cli.main", "serve", "--config", str(config)],
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def test_kill9_during_incident_then_restart(tmp_path: Path) -> None:
    state = tmp_path / "state"
    port = _free_port()
    config = tmp_path / "trainmedic.toml"
    config.write_text(
        f"""
[service]
mode = "action"
poll_interval_s = 0.2
state_dir = "{state}"
api_port = {port}
api_token = "{TOKEN}"

[scheduler]
kind = "local"

[api]
allowed_roots = ["{tmp_path}"]
"""
    )
    sched = LocalScheduler(state / "cluster", nodes=NODES, grace_s=1.5)
    run_dir = tmp_path / "run"
    command = ("-m", "trainmedic.demo.trainer.cli", "--run-dir", str(run_dir),
               "--iters", "100000", "--ckpt-every", "20", "--step-sleep", "0.01")  # fmt: skip
    job_id = sched.submit(LocalJobSpec("k9", 2, 2, command, str(run_dir)))
    service = _serve(config, tmp_path / "serve.log")
    url = f"http://127.0.0.1:{port}"
    try:
        _wait("the API", lambda: _get(url, "/healthz") is not None)
        body = {
            "job_id": job_id,
            "log_paths": [str(run_dir / "job.out")],
            "checkpoint_dir": str(run_dir / "checkpoints"),
            "kernel_logs": {n: str(sched.kernel_log(n)) for n in NODES},
        }
        headers = {"Authorization": f"Bearer {TOKEN}"}
        assert httpx.post(f"{url}/jobs", json=body, headers=headers).status_code in (200, 201)
        store = Store(sqlite_url(str(state / "trainmedic.db")))
        _wait("steady training", lambda: (_job(store, job_id) or 0) >= 60)
        bad = sched.job(job_id).nodes[1]
        (run_dir / "faults.json").write_text(
            json.dumps([{"id": "k", "type": "xid79", "node": bad}])
        )
        _wait("the incident", lambda: store.list_incidents(job_id), 30)
        os.kill(service.pid, signal.SIGKILL)  # in the middle of acting on it
        service.wait(10)
        service = _serve(config, tmp_path / "serve.log")
        job = _wait(
            "the job running again without the bad node",
            lambda: (
                (j := sched.job(job_id)).state is JobState.RUNNING
                and j.attempt >= 1
                and bad not in j.nodes
                and j
            ),
        )
        # The scheduler may finish a requeue the killed service had begun; the restarted
        # service must then record it, not repeat it. Convergence is its word that it is done.
        advice = store.list_advice(job_id)
        assert len(advice) == 1
        assert _wait("convergence", lambda: store.get_advice(advice[0].id).converged_at, 60)
        time.sleep(3)  # let the restarted service settle: it must not act again
        assert sched.job(job_id).attempt == job.attempt == 1, "requeued twice"
        incidents = store.list_incidents(job_id)
        assert len(incidents) == 1 and incidents[0].category.value == "gpu_hardware"
        advice = store.list_advice(job_id)
        assert len(advice) == 1 and advice[0].steps_done.count("requeue") == 1
        drained = [e for e in store.node_history(bad) if e.drained]
        assert len(drained) == 1
        _wait(
            "training to resume", lambda: (_job(store, job_id) or 0) > 0 and _resumed(store, job_id)
        )
    finally:
        service.send_signal(signal.SIGTERM)
        try:
            service.wait(15)
        except subprocess.TimeoutExpired:
            service.kill()
        sched.shutdown(cancel_jobs=True)


def _get(url: str, path: str) -> Any:
    try:
        return httpx.get(url + path, timeout=1.0).json()
    except httpx.HTTPError:
        return None


def _job(store: Store, job_id: str) -> int | None:
    job = store.get_job(job_id)
    return job.last_iteration if job else None


def _resumed(store: Store, job_id: str) -> bool:
    return any(a.attempt >= 1 and a.first_progress_at for a in store.list_attempts(job_id))
