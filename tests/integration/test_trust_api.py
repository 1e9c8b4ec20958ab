"""Trust over the real HTTP API (uvicorn on a socket, a real SQLite file): a registration may
not loosen the operator's policy nor pass its own output off as kernel evidence; the drain
circuit breaker is visible in /healthz, /breaker and /metrics, and only an operator (write
token, or ``trainmedic breaker reset``) resets it."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from trainmedic.api import create_app
from trainmedic.api.server import ApiServer
from trainmedic.cli.main import main
from trainmedic.service.config import default_config
from trainmedic.store import Store, sqlite_url

pytestmark = pytest.mark.slow

TOKEN = "trust-token-1"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@dataclasses.dataclass
class Live:
    url: str
    store: Store  # a second handle on the server's database, as the service process has


@pytest.fixture
def live(tmp_path: Path) -> Iterator[Live]:
    url = sqlite_url(str(tmp_path / "tm.db"))
    base = default_config({"HOME": str(tmp_path)})
    slurm = dataclasses.replace(
        base.scheduler.slurm, kernel_log_template="/var/log/nodes/{node}/kern.log"
    )
    config = dataclasses.replace(
        base,
        service=dataclasses.replace(base.service, api_token=TOKEN, db_url=url),
        scheduler=dataclasses.replace(base.scheduler, slurm=slurm),
        # Paths must be under the operator's roots before the trust checks look at them.
        api=dataclasses.replace(base.api, allowed_roots=("/home", "/var/log")),
    )
    app = create_app(Store(url), config, now=lambda: 1000.0)
    with ApiServer(app) as server:
        yield Live(server.url, Store(url))


@pytest.mark.parametrize(
    ("body", "named"),
    [
        (
            {"policy": {"repeat_offender_count": 1}},
            "'policy.repeat_offender_count' is the operator",
        ),
        ({"policy": {"max_drain_fraction": 1.0}}, "'policy.max_drain_fraction' is the operator"),
        ({"policy": {"drain_enabled": True}}, "'policy.drain_enabled' is the operator's only"),
        ({"policy": {"mode": "action"}}, "'mode' is the operator's only"),
        ({"policy": {"retry_budget": {"hardware": 50}}}, "would loosen the operator's 5"),
        (
            {"log_paths": ["/home/u/7.out"], "kernel_logs": {"node1": "/home/u/7.out"}},
            "kernel_logs.node1: '/home/u/7.out' is not node1's kernel log",
        ),
    ],
)
def test_a_registration_cannot_loosen_what_may_happen_to_shared_nodes(
    live: Live, body: dict[str, object], named: str
) -> None:
    answer = httpx.post(f"{live.url}/jobs", json={"job_id": "7", **body}, headers=AUTH)
    assert answer.status_code == 422, answer.text
    detail = answer.json()["detail"]
    assert named in detail and "\n" not in detail, detail
    assert live.store.list_jobs() == []


def test_a_registration_may_tighten_its_own_policy(live: Live) -> None:
    body = {
        "job_id": "7",
        "policy": {"stop_enforcement": True, "retry_budget": {"hardware": 1}},
        "kernel_logs": {"node1": "/var/log/nodes/node1/kern.log"},
    }
    assert httpx.post(f"{live.url}/jobs", json=body, headers=AUTH).status_code == 201


def _gauge(live: Live) -> str:
    text = httpx.get(f"{live.url}/metrics", headers=AUTH).text
    (line,) = [x for x in text.splitlines() if x.startswith("trainmedic_drain_breaker_tripped ")]
    return line.split()[1]


def test_the_tripped_breaker_is_shown_and_reset_only_by_the_operator(
    live: Live, capsys: pytest.CaptureFixture[str]
) -> None:
    health = httpx.get(f"{live.url}/healthz").json()
    assert (health["drain_breaker"], health["drain_breaker_since"]) == ("closed", None)
    assert _gauge(live) == "0.0"

    live.store.trip_breaker(now=900.0, reason="incident 3 of job 7 would drain past 25%")
    health = httpx.get(f"{live.url}/healthz").json()
    assert (health["drain_breaker"], health["drain_breaker_since"]) == ("tripped", 900.0)
    assert _gauge(live) == "1.0"
    state = httpx.get(f"{live.url}/breaker", headers=AUTH).json()
    assert state["advice_only"] and state["state"]["reason"].startswith("incident 3")
    assert main(["breaker", "status", "--url", live.url, "--token", TOKEN]) == 0
    assert "TRIPPED" in capsys.readouterr().out

    assert httpx.post(f"{live.url}/breaker/reset").status_code == 401
    bad = {"Authorization": "Bearer nope"}
    assert httpx.post(f"{live.url}/breaker/reset", headers=bad).status_code == 403
    assert main(["breaker", "reset", "--url", live.url, "--token", "nope"]) == 1
    assert "403" in capsys.readouterr().err
    assert live.store.breaker_state().tripped

    assert main(["breaker", "reset", "--url", live.url, "--token", TOKEN]) == 0
    assert "reset: closed, drains resume" in capsys.readouterr().out
    health = httpx.get(f"{live.url}/healthz").json()
    assert health["drain_breaker"] == "closed" and _gauge(live) == "0.0"
    state = live.store.breaker_state()
    assert not state.tripped and (state.reset_at, state.reset_by) == (1000.0, "api")
    again = httpx.post(f"{live.url}/breaker/reset", headers=AUTH).json()
    assert again["was_tripped"] is False
