"""Webhooks against a real local HTTP receiver: Slack and generic JSON for incident, advice
and action from a real service cycle; retries with backoff; a failing receiver counted in
/metrics; the loop never waits for a slow receiver."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from trainmedic.api import create_app
from trainmedic.api.server import ApiServer
from trainmedic.core.states import JobState
from trainmedic.schedulers.fake import FakeScheduler
from trainmedic.service.config import default_config
from trainmedic.service.config.sections import Config, NotifyConfig, ServiceConfig
from trainmedic.service.loop import Service
from trainmedic.service.notify import Message, Notifier
from trainmedic.store import JobSpec, Store, sqlite_url

pytestmark = pytest.mark.slow


class Receiver:
    """A real HTTP server on loopback that records JSON bodies; ``fail`` answers 500 to the
    next N requests (or all, with -1); ``delay_s`` answers slowly."""

    def __init__(self) -> None:
        self.bodies: list[tuple[str, dict[str, Any]]] = []
        self.fail = 0
        self.delay_s = 0.0
        self.requests = 0
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", "0"))
                body = json.loads(self.rfile.read(length))
                receiver.requests += 1
                time.sleep(receiver.delay_s)
                if receiver.fail:
                    receiver.fail -= 1 if receiver.fail > 0 else 0
                    self.send_response(500)
                    self.end_headers()
                    return
                receiver.bodies.append((self.path, body))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *_args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    try:
        yield r
    finally:
        r.close()


def _config(receiver: Receiver, **kwargs: Any) -> NotifyConfig:
    return NotifyConfig(
        slack_urls=(f"{receiver.url}/slack",), json_urls=(f"{receiver.url}/json",), **kwargs
    )


def test_a_real_cycle_sends_incident_advice_and_action(tmp_path: Path, receiver: Receiver) -> None:
    kern = tmp_path / "node2.kern.log"
    kern.write_text("")
    (tmp_path / "job.out").write_text("")
    store = Store(sqlite_url(str(tmp_path / "state.db")))
    sched = FakeScheduler()
    sched.add_job("7", ["node1", "node2"])
    notifier = Notifier(_config(receiver, backoff_s=0.05))
    config = Config(service=ServiceConfig(mode="action", state_dir=str(tmp_path)))
    service = Service(config, store, sched, executor_id="t", notifier=notifier)
    service.register(
        "7",
        JobSpec(log_paths=(str(tmp_path / "job.out"),), kernel_logs={"node2": str(kern)}),
    )
    service.cycle()
    with kern.open("a") as f:
        f.write(
            f"{datetime.now(UTC).isoformat()} node2 kernel: NVRM: Xid (PCI:0000:5e:00): 79, "
            "pid=9244, name=python, GPU has fallen off the bus.\n"
        )
    sched.set_state("7", JobState.FAILED)
    service.cycle()
    time.sleep(0.6)  # past the engine's settle time
    service.cycle()
    service.cycle()
    assert notifier.flush(10)
    notifier.close()
    generic = [b for path, b in receiver.bodies if path == "/json"]
    events = [b["event"] for b in generic]
    assert events[:2] == ["incident", "advice"] and "action" in events
    incident = generic[0]
    assert (incident["job_id"], incident["category"], incident["nodes"]) == (
        "7",
        "gpu_hardware",
        ["node2"],
    )
    steps = [b["what"] for b in generic if b["event"] == "action"]
    assert "step:requeue" in steps and "converged" in steps
    slack = [b for path, b in receiver.bodies if path == "/slack"]
    assert len(slack) == len(generic) and all(set(b) == {"text"} for b in slack)
    assert "gpu_hardware on node2" in slack[0]["text"]


def test_retries_with_backoff_then_delivers(receiver: Receiver) -> None:
    waits: list[float] = []
    notifier = Notifier(
        NotifyConfig(json_urls=(receiver.url,), backoff_s=0.5, retries=3), sleep=waits.append
    )
    receiver.fail = 2
    assert notifier.publish(Message("incident", {"event": "incident"}, "x"))
    assert notifier.flush(10)
    assert waits == [0.5, 1.0]  # doubled each time
    assert len(receiver.bodies) == 1 and receiver.requests == 3
    assert notifier.stats.sent["json-0"] == 1 and notifier.stats.failures["json-0"] == 0
    notifier.close()


def test_a_failing_receiver_is_reported_in_metrics(tmp_path: Path, receiver: Receiver) -> None:
    receiver.fail = -1
    notifier = Notifier(NotifyConfig(json_urls=(receiver.url,), retries=1, backoff_s=0.01))
    for _ in range(3):
        notifier.publish(Message("advice", {"event": "advice"}, "x"))
    assert notifier.flush(10)
    url = sqlite_url(str(tmp_path / "tm.db"))
    config = default_config({"HOME": str(tmp_path), "TRAINMEDIC_API_READ_TOKEN": "r"})
    app = create_app(Store(url), config, collectors=[notifier.collector()])
    with ApiServer(app) as server:
        text = httpx.get(f"{server.url}/metrics", headers={"Authorization": "Bearer r"}).text
    assert 'trainmedic_webhook_failures_total{target="json-0"} 3.0' in text
    assert 'trainmedic_webhook_retries_total{target="json-0"} 3.0' in text
    assert receiver.url not in text  # a webhook URL may be a secret
    notifier.close()


def test_the_loop_never_waits_and_a_full_queue_drops(receiver: Receiver) -> None:
    receiver.delay_s = 1.0
    notifier = Notifier(NotifyConfig(json_urls=(receiver.url,), queue_size=2, retries=0))
    started = time.monotonic()
    accepted = [notifier.publish(Message("action", {"n": i}, "x")) for i in range(6)]
    assert time.monotonic() - started < 0.2
    assert accepted.count(False) >= 3 and notifier.stats.dropped == accepted.count(False)
    receiver.delay_s = 0.0
    notifier.close(10)


def test_events_filter_and_config_checks() -> None:
    quiet = Notifier(NotifyConfig(json_urls=("http://127.0.0.1:9/x",), events=("incident",)))
    assert not quiet.publish(Message("action", {}, "x"))
    quiet.close(1)
    with pytest.raises(ValueError, match=r"notify\.events"):
        NotifyConfig(events=("everything",))
    with pytest.raises(ValueError, match="not an http"):
        NotifyConfig(slack_urls=("ftp://x",))


def test_notify_section_loads_from_toml(tmp_path: Path) -> None:
    from trainmedic.core.errors import ConfigError
    from trainmedic.service.config import load_config

    path = tmp_path / "tm.toml"
    path.write_text('[notify]\nslack_urls = ["https://hooks.example/x"]\nevents = ["incident"]\n')
    config = load_config(path, env={"TRAINMEDIC_STATE_DIR": str(tmp_path)})
    assert config.notify.slack_urls == ("https://hooks.example/x",)
    assert config.notify.events == ("incident",)
    path.write_text('[notify]\nevents = ["all"]\n')
    with pytest.raises(ConfigError, match="notify"):
        load_config(path, env={"TRAINMEDIC_STATE_DIR": str(tmp_path)})
