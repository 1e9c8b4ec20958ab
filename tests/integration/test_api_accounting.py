"""Accounting, node history, cluster summary, the scorecard and the web pages, over HTTP on a
real uvicorn server and a real SQLite store written the way the service writes it."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from trainmedic.api import create_app
from trainmedic.api.server import ApiServer
from trainmedic.core.model import Action, Advice, Category, Event, Implicated, Kind, Role, Verdict
from trainmedic.service.config import default_config
from trainmedic.store import AdviceMode, AdviceStatus, CheckpointSeen, Store, sqlite_url

pytestmark = pytest.mark.slow

TOKEN = "test-token-123"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
READER = "reader-456"
READ = {"Authorization": f"Bearer {READER}"}  # reads need the read token (or the write one)
NOW = 1000.0
XID = Event(
    "xid79",
    Category.GPU_HARDWARE,
    Kind.CRASH,
    Role.PRIMARY,
    3,
    "NVRM: Xid 79, GPU fell off",
    node="node2",
    strong=True,
)
CRASH = Verdict(
    failure=True,
    kind=Kind.CRASH,
    category=Category.GPU_HARDWARE,
    confidence=0.95,
    root_cause=XID,
    implicated=Implicated(nodes=("node2",)),
    basis="Xid 79 on node2",
)
HANG = Verdict(
    failure=True,
    kind=Kind.HANG,
    category=Category.UNKNOWN,
    confidence=0.5,
    basis="no progress for 30 s",
)


@dataclasses.dataclass
class Live:
    url: str
    store: Store
    monitor_advice: int


def populate(store: Store) -> int:
    """Attempt 0 trains, checkpoints, and crashes on node2 (action mode restarts it without
    node2); attempt 1 trains and then hangs, with monitor-mode advice still unanswered."""
    store.register_job("j1", "local", now=0.0, name="llm-pretrain")
    store.record_attempt_start("j1", 0, started_at=10.0, nodes=["node1", "node2"])
    store.update_job_progress("j1", state="RUNNING", progress_at=20.0, iteration=0)
    store.record_checkpoints(
        "j1", [CheckpointSeen(40, 58.0, True), CheckpointSeen(40, 62.0, False)]
    )
    store.record_checkpoints("j1", [CheckpointSeen(80, 100.0, False)])
    store.update_job_progress("j1", progress_at=120.0, iteration=100)
    crash = store.record_decision(
        "j1",
        0,
        CRASH,
        Advice(Action.RESTART_EXCLUDING, "GPU lost", ("node2",), ("node2",)),
        mode=AdviceMode.ACTION,
        now=123.0,
        detected_at=123.0,
        fault_time=121.0,
        evidence=(XID,),
    )
    store.record_node_event(
        "node2",
        time=123.0,
        job_id="j1",
        incident_id=crash.incident_id,
        category=Category.GPU_HARDWARE,
        strong=True,
    )
    store.record_node_event(
        "node2",
        time=124.0,
        job_id="j1",
        incident_id=crash.incident_id,
        drained=True,
        reason="trainmedic: incident 1",
    )
    assert store.claim_advice(crash.advice.id, "exec")
    store.mark_applied(crash.advice.id, now=124.0)
    store.record_attempt_end("j1", 0, ended_at=124.0, end_state="FAILED")
    store.record_attempt_start("j1", 1, started_at=130.0, nodes=["node1", "node3"])
    store.set_advice_status(crash.advice.id, AdviceStatus.CONVERGED, now=131.0)
    store.update_job_progress("j1", progress_at=140.0, iteration=81)
    store.update_job_progress("j1", progress_at=600.0, iteration=541)
    hang = store.record_decision(
        "j1",
        1,
        HANG,
        Advice(Action.RESTART, "hang: restart"),
        mode=AdviceMode.MONITOR,
        now=640.0,
        detected_at=640.0,
        fault_time=600.0,
    )
    store.record_node_event(
        "node3", time=640.0, job_id="j1", incident_id=hang.incident_id, category=Category.UNKNOWN
    )
    return hang.advice.id


@pytest.fixture
def live(tmp_path: Path) -> Iterator[Live]:
    url = sqlite_url(str(tmp_path / "tm.db"))
    base = default_config({"HOME": str(tmp_path)})
    config = dataclasses.replace(
        base,
        service=dataclasses.replace(
            base.service, api_token=TOKEN, api_read_token=READER, db_url=url
        ),
    )
    store = Store(url)
    advice_id = populate(store)
    with ApiServer(create_app(Store(url), config, now=lambda: NOW)) as server:
        yield Live(server.url, store, advice_id)


def test_job_accounting(live: Live) -> None:
    body = httpx.get(f"{live.url}/jobs/j1/accounting", headers=READ).json()
    assert body["wall_s"] == NOW
    assert sum(body["by_part"].values()) == pytest.approx(NOW, abs=0.01)
    crash, hang = body["interruptions"]
    assert (crash["category"], crash["lost_iterations"], crash["lost_basis"]) == (
        "gpu_hardware",
        20,
        "checkpoint",
    )
    assert (crash["shutdown_s"], crash["detection_s"], crash["decision_action_s"]) == (4, 2, 8)
    assert (crash["human_wait_s"], crash["restart_s"]) == (0.0, 10.0)
    assert hang["open"] and hang["human_wait_s"] is None  # nobody acted yet: not measured
    assert body["checkpoint_s"] == 4.0 and body["checkpoints_unmeasured"] == 1
    assert 0 < body["goodput"] < 1
    assert "segments" not in body
    assert httpx.get(f"{live.url}/jobs/j1/accounting?segments=true", headers=READ).json()[
        "segments"
    ]
    missing = httpx.get(f"{live.url}/jobs/nope/accounting", headers=READ)
    assert missing.status_code == 404 and "nope" in missing.json()["detail"]


def test_node_history(live: Live) -> None:
    node = httpx.get(f"{live.url}/nodes/node2/history", headers=READ).json()
    assert (node["incidents"], node["drains"], node["drained"]) == (1, 1, True)
    assert node["mtbi_s"] is None  # one incident: not measured
    assert len(node["events"]) == 2
    assert httpx.get(f"{live.url}/nodes/node9/history", headers=READ).status_code == 404
    assert httpx.get(f"{live.url}/nodes/bad%20name/history", headers=READ).status_code == 422


def test_cluster_summary_and_feedback_round_trip(live: Live) -> None:
    summary = httpx.get(f"{live.url}/cluster/summary", headers=READ).json()
    assert [a["id"] for a in summary["advice_waiting"]] == [live.monitor_advice]
    assert [i["kind"] for i in summary["open_incidents"]] == ["hang"]
    assert [n["node"] for n in summary["drained_nodes"]] == ["node2"]
    day = summary["windows"][0]
    assert day["badput_by_cause"]["gpu_hardware"] > 0 and day["badput_by_cause"]["unknown"] > 0
    path = f"{live.url}/advice/{live.monitor_advice}/feedback"
    answer = {"agree": True, "action_taken": "restart", "note": "restarted by hand", "by": "ops"}
    assert httpx.post(path, json=answer).status_code == 401
    bad = httpx.post(path, json={**answer, "action_taken": "reboot"}, headers=AUTH)
    assert bad.status_code == 422 and "action_taken" in bad.json()["detail"]
    assert (
        httpx.post(f"{live.url}/advice/999/feedback", json=answer, headers=AUTH).status_code == 404
    )
    created = httpx.post(path, json=answer, headers=AUTH)
    assert created.status_code == 201 and created.json()["agree"] is True
    assert [f["by"] for f in httpx.get(path, headers=READ).json()] == ["ops"]
    after = httpx.get(f"{live.url}/cluster/summary", headers=READ).json()
    assert after["advice_waiting"] == []
    (unknown,) = after["scorecard"]["by_category"]
    assert (unknown["key"], unknown["agreement"], unknown["action_match"]) == ("unknown", 1.0, 1.0)
    assert httpx.get(f"{live.url}/scorecard", headers=READ).json()["answered"] == 1


def test_metrics_expose_downtime_and_badput(live: Live) -> None:
    text = httpx.get(f"{live.url}/metrics", headers=READ).text
    assert 'trainmedic_job_downtime_seconds{job_id="j1",part="lost_work"}' in text
    assert 'trainmedic_badput_seconds{category="gpu_hardware"}' in text
    assert 'trainmedic_node_incidents{node="node2"} 1.0' in text
    assert 'trainmedic_interruptions_total{category="unknown"} 1.0' in text


def test_pages_render_and_the_form_needs_the_write_token(live: Live) -> None:
    cluster = httpx.get(f"{live.url}/ui", headers=READ)
    assert cluster.status_code == 200 and "Badput by cause" in cluster.text
    assert 'href="/ui/jobs/j1"' in cluster.text and "node2" in cluster.text
    job = httpx.get(f"{live.url}/ui/jobs/j1", headers=READ).text
    assert "Incident #1: crash / gpu hardware" in job and "NVRM: Xid 79" in job
    assert "the scheduler shows it done" in job and "monitor mode: recorded" in job
    node = httpx.get(f"{live.url}/ui/nodes/node2", headers=READ).text
    assert "drained" in node and "trainmedic: incident 1" in node
    assert httpx.get(f"{live.url}/ui/jobs/nope", headers=READ).status_code == 404
    assert httpx.get(f"{live.url}/ui/static/chart.umd.min.js", headers=READ).status_code == 200
    form = f"{live.url}/ui/advice/{live.monitor_advice}/feedback"
    answer = {"agree": "no", "action_taken": "stop", "note": "", "by": "web"}
    refused = httpx.post(form, data={**answer, "api_token": "wrong"}, headers=READ)
    assert refused.status_code == 403 and "write token" in refused.text
    assert live.store.list_feedback() == []
    done = httpx.post(form, data={**answer, "api_token": TOKEN}, headers=READ)
    assert done.status_code == 303 and "answered=" in done.headers["location"]
    (saved,) = live.store.list_feedback()
    assert (saved.agree, saved.action_taken, saved.by) == (False, "stop", "web")


def _report(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trainmedic.cli.main", "report", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "TRAINMEDIC_API_READ_TOKEN": READER},
    )


def test_report_cli_reads_the_api_or_the_store(live: Live, tmp_path: Path) -> None:
    job = _report("j1", "--url", live.url)
    assert job.returncode == 0, job.stderr
    assert "gpu_hardware/crash" in job.stdout and "not measured" in job.stdout
    assert "WHERE THE TIME WENT" in job.stdout
    as_json = json.loads(_report("j1", "--url", live.url, "--json").stdout)
    assert as_json == httpx.get(f"{live.url}/jobs/j1/accounting", headers=READ).json()
    cluster = _report("--cluster", "--db", sqlite_url(str(tmp_path / "tm.db")))
    assert cluster.returncode == 0, cluster.stderr
    assert "BADPUT BY CAUSE" in cluster.stdout and "node2" in cluster.stdout
    unknown = _report("nope", "--url", live.url)
    assert unknown.returncode == 1 and len(unknown.stderr.strip().splitlines()) == 1
    missing_dir = _report("j1", "--state-dir", str(tmp_path / "absent"))
    assert missing_dir.returncode == 2 and "--state-dir" in missing_dir.stderr
    neither = _report()
    assert neither.returncode == 2


def test_pages_need_the_read_token_once_one_is_configured(tmp_path: Path) -> None:
    url = sqlite_url(str(tmp_path / "tm.db"))
    populate(Store(url))
    base = default_config({"HOME": str(tmp_path)})
    service = dataclasses.replace(base.service, api_token=TOKEN, api_read_token="reader")
    app = create_app(Store(url), dataclasses.replace(base, service=service), now=lambda: NOW)
    with ApiServer(app) as server, httpx.Client(base_url=server.url) as client:
        refused = client.get("/ui/jobs/j1")
        assert refused.status_code == 401 and "Token needed" in refused.text
        assert client.get("/ui", params={"token": "wrong"}).status_code == 401
        opened = client.get("/ui", params={"token": "reader"})
        assert opened.status_code == 200 and client.cookies.get("token") == "reader"
        assert client.get("/ui/jobs/j1").status_code == 200  # the cookie carries it
        bearer = httpx.get(f"{server.url}/ui/nodes/node2", headers=AUTH)
        assert bearer.status_code == 200  # the write token reads too
