"""``trainmedic status | incidents | advice`` against a real API server (uvicorn + SQLite)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from trainmedic.api import create_app
from trainmedic.api.server import ApiServer
from trainmedic.cli.main import main
from trainmedic.core.model import Action, Advice, Category, Event, Implicated, Kind, Role, Verdict
from trainmedic.service.config import default_config
from trainmedic.store import AdviceMode, JobSpec, Store, sqlite_url

pytestmark = pytest.mark.slow

READ_TOKEN = "client-read-token"
XID = Event("xid79", Category.GPU_HARDWARE, Kind.CRASH, Role.PRIMARY, 3, "NVRM: Xid 79")


@pytest.fixture(scope="module")
def api_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    url = sqlite_url(str(tmp_path_factory.mktemp("client") / "tm.db"))
    store = Store(url)
    spec = JobSpec(log_paths=("/logs/r0.log",))
    store.register_job("j1", "local", now=100.0, name="train", spec=spec)
    store.record_attempt_start("j1", 0, started_at=101.0, nodes=["node1", "node2"])
    store.update_job_progress("j1", state="RUNNING", progress_at=150.0, iteration=42)
    store.register_job("j2", "slurm", now=120.0)
    verdict = Verdict(True, Kind.CRASH, Category.GPU_HARDWARE, 0.9, XID, Implicated(("node2",)))
    incident = store.add_incident("j1", 0, verdict, detected_at=160.0, fault_time=159.0)
    advice = Advice(Action.RESTART_EXCLUDING, "xid79 on node2", ("node2",), ("node2",))
    store.put_advice("j1", 0, advice, mode=AdviceMode.ACTION, now=160.0, incident_id=incident)
    store.put_advice("j2", 0, Advice(Action.STOP, "app error"), mode=AdviceMode.MONITOR, now=1.0)
    env = {"HOME": "/nonexistent", "TRAINMEDIC_API_READ_TOKEN": READ_TOKEN}
    with ApiServer(create_app(store, default_config(env))) as server:
        yield server.url


@pytest.fixture(autouse=True)
def _client_token(monkeypatch: pytest.MonkeyPatch) -> None:
    """The client reads its token from the environment, as a user's shell would give it."""
    monkeypatch.setenv("TRAINMEDIC_API_READ_TOKEN", READ_TOKEN)


def test_status_table_and_one_job(api_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["status", "--url", api_url]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == [
        "JOB",
        "SCHEDULER",
        "STATE",
        "ATTEMPT",
        "ITERATION",
        "CHECKPOINT",
        "PROGRESS",
    ]
    assert out[1].split()[:5] == ["j1", "local", "RUNNING", "0", "42"]
    assert out[2].split()[:3] == ["j2", "slurm", "?"]
    assert main(["status", "j1", "--url", api_url]) == 0
    detail = capsys.readouterr().out
    assert "job j1 (local) train" in detail and "node1,node2" in detail


def test_incidents_and_advice_tables(api_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["incidents", "--url", api_url, "--job", "j1"]) == 0
    out = capsys.readouterr().out
    assert "gpu_hardware" in out and "xid79: NVRM: Xid 79" in out and "node2" in out
    assert main(["advice", "--url", api_url, "--active"]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert len(rows) == 2 and "restart_excluding" in rows[1] and "pending" in rows[1]
    assert main(["advice", "--url", api_url, "--job", "nobody"]) == 0
    assert capsys.readouterr().out.strip() == "no advice"


def test_json_output(api_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["advice", "--url", api_url, "--json"]) == 0
    advice = json.loads(capsys.readouterr().out)
    assert {a["status"] for a in advice} == {"pending", "recorded"}


def test_unknown_job_is_exit_1(api_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["status", "nope", "--url", api_url]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown job 'nope'" in err


def test_unreachable_api_is_one_line_and_exit_2(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens here once the socket is closed
    env = {**os.environ, "TRAINMEDIC_URL": f"http://127.0.0.1:{port}"}
    done = subprocess.run(
        [sys.executable, "-m", "trainmedic.cli.main", "status"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(
        f"trainmedic status: cannot reach the API at http://127.0.0.1:{port}"
    )
