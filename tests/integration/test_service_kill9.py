"""kill -9 of the service during an incident, then a restart: no action applied twice, no
incident lost, the job not left stopped. Real `trainmedic serve` processes, the real local
backend with torchrun/gloo workers, SQLite shared through the state directory."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import pytest
from tests.integration.serve_helpers import (
    free_port,
    get_json,
    kill9,
    last_iteration,
    resumed,
    running_again,
    serve,
    stop_all,
    wait,
)

from trainmedic.schedulers.local.scheduler import LocalJobSpec, LocalScheduler
from trainmedic.store import Store, sqlite_url

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]
TOKEN = "kill9-token"
NODES = ("node1", "node2", "node3", "node4")


def test_kill9_during_incident_then_restart(tmp_path: Path) -> None:
    state = tmp_path / "state"
    port = free_port()
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
    service = serve(config, tmp_path / "serve.log")
    url = f"http://127.0.0.1:{port}"
    try:
        wait("the API", lambda: get_json(url, "/healthz") is not None)
        body = {
            "job_id": job_id,
            "log_paths": [str(run_dir / "job.out")],
            "checkpoint_dir": str(run_dir / "checkpoints"),
            "kernel_logs": {n: str(sched.kernel_log(n)) for n in NODES},
        }
        headers = {"Authorization": f"Bearer {TOKEN}"}
        assert httpx.post(f"{url}/jobs", json=body, headers=headers).status_code in (200, 201)
        store = Store(sqlite_url(str(state / "trainmedic.db")))
        wait("steady training", lambda: (last_iteration(store, job_id) or 0) >= 60)
        bad = sched.job(job_id).nodes[1]
        (run_dir / "faults.json").write_text(
            json.dumps([{"id": "k", "type": "xid79", "node": bad}])
        )
        wait("the incident", lambda: store.list_incidents(job_id), 30)
        kill9(service)  # in the middle of acting on it
        service = serve(config, tmp_path / "serve.log")
        job = running_again(lambda: sched.job(job_id), bad)
        # The scheduler may finish a requeue the killed service had begun; the restarted
        # service must then record it, not repeat it. Convergence is its word that it is done.
        advice = store.list_advice(job_id)
        assert len(advice) == 1
        assert wait("convergence", lambda: store.get_advice(advice[0].id).converged_at, 60)
        time.sleep(3)  # let the restarted service settle: it must not act again
        assert sched.job(job_id).attempt == job.attempt == 1, "requeued twice"
        incidents = store.list_incidents(job_id)
        assert len(incidents) == 1 and incidents[0].category.value == "gpu_hardware"
        advice = store.list_advice(job_id)
        assert len(advice) == 1 and advice[0].steps_done.count("requeue") == 1
        drained = [e for e in store.node_history(bad) if e.drained]
        assert len(drained) == 1
        wait("training to resume", lambda: resumed(store, job_id))
    finally:
        stop_all([service])
        sched.shutdown(cancel_jobs=True)
