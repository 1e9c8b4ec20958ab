"""Two ``trainmedic serve`` processes on one SQLite store: only the leader acts; kill -9 of
the leader at a random point of an incident, and the standby finishes the recovery with no
action applied twice. Real processes, the real local backend with torchrun/gloo workers."""

from __future__ import annotations

import json
import random
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
TOKEN = "failover-token"
NODES = ("node1", "node2", "node3", "node4")


def _config(path: Path, state: Path, port: int) -> Path:
    path.write_text(
        f"""
[api]
allowed_roots = ["{path.parent}"]

[service]
mode = "action"
poll_interval_s = 0.2
state_dir = "{state}"
api_port = {port}
api_token = "{TOKEN}"

[scheduler]
kind = "local"
"""
    )
    return path


@pytest.mark.parametrize("kill_after_s", [0.0, random.uniform(0.05, 1.5)])
def test_standby_takes_over_when_the_leader_is_killed(tmp_path: Path, kill_after_s: float) -> None:
    state = tmp_path / "state"
    ports = (free_port(), free_port())
    configs = [_config(tmp_path / f"t{i}.toml", state, p) for i, p in enumerate(ports)]
    sched = LocalScheduler(state / "cluster", nodes=NODES, grace_s=1.5)
    run_dir = tmp_path / "run"
    command = ("-m", "trainmedic.demo.trainer", "--run-dir", str(run_dir),
               "--iters", "100000", "--ckpt-every", "20", "--step-sleep", "0.01")  # fmt: skip
    job_id = sched.submit(LocalJobSpec("fo", 2, 2, command, str(run_dir)))
    leader = serve(configs[0], tmp_path / "leader.log")
    urls = [f"http://127.0.0.1:{p}" for p in ports]
    wait("the leader's API", lambda: get_json(urls[0], "/healthz") is not None)
    standby = serve(configs[1], tmp_path / "standby.log")
    try:
        wait("the standby's API", lambda: get_json(urls[1], "/healthz") is not None)
        body = {
            "job_id": job_id,
            "log_paths": [str(run_dir / "job.out")],
            "checkpoint_dir": str(run_dir / "checkpoints"),
            "kernel_logs": {n: str(sched.kernel_log(n)) for n in NODES},
        }
        headers = {"Authorization": f"Bearer {TOKEN}"}
        assert httpx.post(f"{urls[1]}/jobs", json=body, headers=headers).status_code in (200, 201)
        store = Store(sqlite_url(str(state / "trainmedic.db")))
        wait("steady training", lambda: (last_iteration(store, job_id) or 0) >= 60)
        bad = sched.job(job_id).nodes[1]
        (run_dir / "faults.json").write_text(
            json.dumps([{"id": "k", "type": "xid79", "node": bad}])
        )
        wait("the incident", lambda: store.list_incidents(job_id), 30)
        time.sleep(kill_after_s)
        kill9(leader)
        job = running_again(lambda: sched.job(job_id), bad)
        advice = store.list_advice(job_id)
        assert len(advice) == 1
        assert wait("convergence", lambda: store.get_advice(advice[0].id).converged_at, 60)
        time.sleep(3)  # the new leader must not act again
        assert sched.job(job_id).attempt == job.attempt == 1, "requeued twice"
        assert len(store.list_incidents(job_id)) == 1
        advice = store.list_advice(job_id)
        assert len(advice) == 1 and advice[0].steps_done.count("requeue") == 1
        assert len([e for e in store.node_history(bad) if e.drained]) == 1
        wait("training to resume", lambda: resumed(store, job_id))
        assert "leading now" in (tmp_path / "standby.log").read_text()
    finally:
        stop_all([leader, standby])
        sched.shutdown(cancel_jobs=True)
