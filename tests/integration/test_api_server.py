"""The HTTP API on a real uvicorn server (a thread, a real socket), talked to with httpx.

The store behind it is a real SQLite file that the test also writes through a second Store
instance, as the service process would."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from trainmedic.api import create_app
from trainmedic.api.server import ApiServer
from trainmedic.core.model import Action, Advice, Category, Event, Implicated, Kind, Role, Verdict
from trainmedic.service.config import ApiConfig, default_config
from trainmedic.store import AdviceMode, Store, sqlite_url

pytestmark = pytest.mark.slow

TOKEN = "test-token-123"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
READ = {"Authorization": "Bearer read-token-456"}
XID = Event("xid79", Category.GPU_HARDWARE, Kind.CRASH, Role.PRIMARY, 3, "Xid 79", node="node2")


def _read(url: str, **kwargs: Any) -> httpx.Response:
    return httpx.get(url, headers=READ, **kwargs)


@dataclasses.dataclass
class Live:
    url: str
    store: Store  # a second handle on the server's database, as another process would have


@pytest.fixture
def live(tmp_path: Path) -> Iterator[Live]:
    url = sqlite_url(str(tmp_path / "tm.db"))
    base = default_config({"HOME": str(tmp_path)})
    config = dataclasses.replace(
        base,
        service=dataclasses.replace(
            base.service, api_token=TOKEN, api_read_token="read-token-456", db_url=url
        ),
        api=ApiConfig(allowed_roots=("/logs", "/k", "/ckpt")),
    )
    app = create_app(Store(url), config, now=lambda: 1000.0)
    with ApiServer(app) as server:
        yield Live(server.url, Store(url))


def test_health_and_openapi(live: Live) -> None:
    health = _read(f"{live.url}/healthz").json()
    assert health == {
        "status": "ok",
        "mode": "monitor",
        "time": 1000.0,
        "jobs": 0,
        "drain_breaker": "closed",
        "drain_breaker_since": None,
    }
    spec = _read(f"{live.url}/openapi.json").json()
    paths = ["/jobs", "/jobs/{job_id}", "/incidents", "/incidents/{incident_id}", "/advice"]
    paths += ["/advice/{advice_id}/reconciliation", "/nodes", "/metrics", "/healthz"]
    assert set(paths) <= set(spec["paths"])
    assert "HTTPBearer" in spec["components"]["securitySchemes"]


def test_mutations_need_the_token(live: Live) -> None:
    body = {"job_id": "j1"}
    missing = httpx.post(f"{live.url}/jobs", json=body)
    assert missing.status_code == 401
    assert missing.headers["www-authenticate"] == "Bearer"
    wrong = httpx.post(f"{live.url}/jobs", json=body, headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 403
    assert _read(f"{live.url}/jobs").json() == []


def test_bad_input_is_a_one_line_4xx_and_the_server_stays_up(live: Live) -> None:
    cases = [
        ({"job_id": ""}, "body.job_id"),
        ({"job_id": "j 1; rm"}, "body.job_id"),
        ({"job_id": "j1", "scheduler": "pbs"}, "body.scheduler"),
        ({"job_id": "j1", "log_paths": "x"}, "body.log_paths"),
        ({"job_id": "j1", "surprise": 1}, "body.surprise"),
        ({"job_id": "j1", "policy": {"retry_budgets": 1}}, "unknown key 'policy.retry_budgets'"),
        ({"job_id": "j1", "policy": {"stop_enforcement": "yes"}}, "policy.stop_enforcement"),
    ]
    for body, named in cases:
        answer = httpx.post(f"{live.url}/jobs", json=body, headers=AUTH)
        assert answer.status_code == 422, body
        detail = answer.json()["detail"]
        assert isinstance(detail, str) and "\n" not in detail and named in detail, detail
    not_json = httpx.post(
        f"{live.url}/jobs", content=b"{", headers={**AUTH, "content-type": "application/json"}
    )
    assert not_json.status_code == 422
    assert _read(f"{live.url}/incidents/notanumber").status_code == 422
    assert _read(f"{live.url}/incidents/99").json() == {"detail": "unknown incident 99"}
    assert _read(f"{live.url}/jobs/none").status_code == 404
    assert _read(f"{live.url}/healthz").status_code == 200


def test_register_job_then_read_it(live: Live) -> None:
    body = {
        "job_id": "j1",
        "scheduler": "local",
        "name": "train",
        "log_paths": ["/logs/rank0.log"],
        "kernel_logs": {"node1": "/k/node1.log"},
        "checkpoint_dir": "/ckpt",
        "nodes": ["node1", "node2"],
        "policy": {"stop_enforcement": True, "retry_budget": {"hardware": 2}},
    }
    created = httpx.post(f"{live.url}/jobs", json=body, headers=AUTH)
    assert created.status_code == 201, created.text
    assert created.json()["registered_at"] == 1000.0
    live.store.record_attempt_start("j1", 0, started_at=1001.0, nodes=["node1", "node2"])
    detail = _read(f"{live.url}/jobs/j1").json()
    assert detail["job"]["spec"]["kernel_logs"] == {"node1": "/k/node1.log"}
    assert detail["job"]["spec"]["policy"]["retry_budget"] == {"hardware": 2}
    assert [a["attempt"] for a in detail["attempts"]] == [0]
    assert [j["job_id"] for j in _read(f"{live.url}/jobs").json()] == ["j1"]


def test_incidents_advice_reconciliation_nodes_metrics(live: Live) -> None:
    store = live.store
    implicated = Implicated(nodes=("node2",))
    verdict = Verdict(True, Kind.CRASH, Category.GPU_HARDWARE, 0.9, XID, implicated)
    incident = store.add_incident("j1", 0, verdict, detected_at=990.0, fault_time=989.0)
    store.add_incident("j2", 0, verdict, detected_at=995.0)
    advice = Advice(Action.RESTART_EXCLUDING, "exclude node2", ("node2",), ("node2",))
    adv = store.put_advice("j1", 0, advice, mode=AdviceMode.ACTION, now=990.0, incident_id=incident)
    gpu = Category.GPU_HARDWARE
    store.record_node_event("node2", time=990.0, incident_id=incident, strong=True, category=gpu)

    listed = _read(f"{live.url}/incidents", params={"job_id": "j1"}).json()
    assert [i["id"] for i in listed] == [incident]
    one = _read(f"{live.url}/incidents/{incident}").json()
    assert one["root_cause"]["signature"] == "xid79"
    assert one["implicated"]["nodes"] == ["node2"]
    active = _read(f"{live.url}/advice", params={"active": "true"}).json()
    assert [a["id"] for a in active] == [adv.id]

    reconcile = f"{live.url}/advice/{adv.id}/reconciliation"
    claim = {"status": "applying", "executor_id": "ext-1", "steps_done": ["hold"]}
    assert httpx.post(reconcile, json=claim, headers=AUTH).status_code == 200
    other = {"status": "applying", "executor_id": "ext-2"}
    assert httpx.post(reconcile, json=other, headers=AUTH).status_code == 409
    done = {"status": "converged", "executor_id": "ext-1", "applied": True, "note": "running"}
    answer = httpx.post(reconcile, json=done, headers=AUTH).json()
    assert answer["status"] == "converged" and answer["steps_done"] == ["hold"]
    assert answer["converged_at"] == 1000.0
    back = httpx.post(reconcile, json={"status": "pending"}, headers=AUTH)
    assert back.status_code == 409 and "converged -> pending" in back.json()["detail"]
    assert _read(f"{live.url}/advice", params={"active": "true"}).json() == []

    (node,) = _read(f"{live.url}/nodes").json()
    assert (node["node"], node["incidents"], node["strong_evidence"]) == ("node2", 1, 1)

    metrics = _read(f"{live.url}/metrics")
    assert metrics.headers["content-type"].startswith("text/plain")
    text = metrics.text
    assert "# TYPE trainmedic_detection_latency_seconds histogram" in text
    assert 'trainmedic_detection_latency_seconds_count{kind="crash"} 1.0' in text
    assert "# TYPE trainmedic_action_latency_seconds histogram" in text
    assert "trainmedic_recovery_latency_seconds_sum 10.0" in text
    assert 'trainmedic_incidents_total{category="gpu_hardware",kind="crash"} 2.0' in text
    assert "trainmedic_restarts_total 1.0" in text
