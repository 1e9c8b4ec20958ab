"""The external attribution hook: a real command and a real local HTTP server answer, slow or
failing ones never hold recovery past their timeout, and the answer is recorded in the
incident's basis (applied only where ``override`` allows)."""

from __future__ import annotations

import json
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from trainmedic.core.attribute.hook import (
    HOOK_CONFIDENCE_CAP,
    HookConfig,
    HookOutcome,
    HookVerdict,
    combine,
    hook_payload,
    parse_answer,
)
from trainmedic.core.errors import ConfigError, InputError
from trainmedic.core.model import NO_FAILURE, Category, Kind, Verdict
from trainmedic.core.states import JobState
from trainmedic.schedulers.fake import FakeScheduler
from trainmedic.service.attribution_hook import AttributionHook
from trainmedic.service.config import load_config
from trainmedic.service.config.sections import Config, ServiceConfig
from trainmedic.service.loop import Service
from trainmedic.store import JobSpec, Store, sqlite_url

OURS = Verdict(True, Kind.CRASH, Category.UNKNOWN, 0.4, basis="catalogue: only cascades")
ANSWER = {"category": "gpu_hardware", "kind": "crash", "confidence": 0.95, "basis": "site tool"}


def script(tmp_path: Path, body: str) -> tuple[str, ...]:
    path = tmp_path / "hook.py"
    path.write_text(textwrap.dedent(body))
    return (sys.executable, str(path))


def test_parse_answer_and_bad_answers() -> None:
    assert parse_answer(json.dumps(ANSWER)) == HookVerdict(
        Category.GPU_HARDWARE, Kind.CRASH, 0.95, "site tool"
    )
    for bad in ("not json", "[1]", '{"kind": "crash"}', '{"category": "cosmic_rays"}'):
        with pytest.raises(InputError):
            parse_answer(bad)
    with pytest.raises(InputError, match="outside"):
        parse_answer('{"category": "storage", "confidence": 3}')


def test_combine_records_and_applies_only_where_allowed() -> None:
    answered = HookOutcome("answered", parse_answer(json.dumps(ANSWER)), elapsed_s=0.1)
    kept = combine(OURS, answered, frozenset())
    assert kept.category is Category.UNKNOWN and "recorded, not applied" in kept.basis
    applied = combine(OURS, answered, frozenset({Category.UNKNOWN}))
    assert applied.category is Category.GPU_HARDWARE
    assert applied.confidence == HOOK_CONFIDENCE_CAP and "ours was crash/unknown" in applied.basis
    confident = Verdict(True, Kind.CRASH, Category.STORAGE, 0.8, basis="catalogue")
    assert combine(confident, answered, frozenset({Category.UNKNOWN})).category is Category.STORAGE
    timed_out = combine(
        OURS, HookOutcome("timeout", detail="no answer", elapsed_s=2.5), frozenset()
    )
    assert timed_out.category is Category.UNKNOWN and "timeout after 2.5 s" in timed_out.basis
    assert combine(NO_FAILURE, answered, frozenset({Category.UNKNOWN})).failure is False


def test_config_section_is_validated(tmp_path: Path) -> None:
    good = tmp_path / "ok.toml"
    good.write_text(
        '[attribution_hook]\ncommand = ["/usr/bin/site-attrib"]\ntimeout_s = 1.5\n'
        'override = ["unknown"]\n'
    )
    hook = load_config(good).attribution_hook
    assert hook.enabled and hook.override == frozenset({Category.UNKNOWN})
    both = tmp_path / "both.toml"
    both.write_text('[attribution_hook]\ncommand = ["x"]\nurl = "http://127.0.0.1:9/"\n')
    with pytest.raises(ConfigError, match="not both"):
        load_config(both)
    typo = tmp_path / "typo.toml"
    typo.write_text('[attribution_hook]\noverride = ["unkown"]\n')
    with pytest.raises(ConfigError):
        load_config(typo)
    assert not HookConfig().enabled


def test_a_real_command_receives_the_evidence_on_stdin(tmp_path: Path) -> None:
    seen = tmp_path / "seen.json"
    command = script(
        tmp_path,
        f"""
        import json, sys
        data = json.load(sys.stdin)
        open({str(seen)!r}, "w").write(json.dumps(data))
        print(json.dumps({{"category": "node_hardware", "confidence": 0.7}}))
        """,
    )
    hook = AttributionHook(HookConfig(command=command, timeout_s=10))
    try:
        verdict = hook.review("42", 1, OURS, ())
    finally:
        hook.close()
    assert "external hook: crash/node_hardware (0.70)" in verdict.basis
    sent = json.loads(seen.read_text())
    assert sent["job_id"] == "42" and sent["verdict"]["category"] == "unknown"


def test_a_slow_command_is_killed_and_does_not_hold_recovery(tmp_path: Path) -> None:
    command = script(tmp_path, "import time\ntime.sleep(30)\n")
    hook = AttributionHook(HookConfig(command=command, timeout_s=0.5))
    start = time.monotonic()
    try:
        outcome = hook.consult(hook_payload("1", 0, OURS, ()))
    finally:
        hook.close()
    assert outcome.status == "timeout" and time.monotonic() - start < 3.0


def test_a_failing_command_changes_nothing(tmp_path: Path) -> None:
    command = script(tmp_path, "import sys\nprint('boom', file=sys.stderr)\nsys.exit(3)\n")
    hook = AttributionHook(HookConfig(command=command, timeout_s=10))
    try:
        verdict = hook.review("1", 0, OURS, ())
    finally:
        hook.close()
    assert verdict.category is Category.UNKNOWN and "external hook error" in verdict.basis
    assert "exit status 3: boom" in verdict.basis


class _Handler(BaseHTTPRequestHandler):
    delay_s = 0.0
    bodies: list[dict[str, object]] = []  # noqa: RUF012 (test-only shared record)

    def do_POST(self) -> None:
        length = int(self.headers["Content-Length"])
        type(self).bodies.append(json.loads(self.rfile.read(length)))
        time.sleep(type(self).delay_s)
        body = json.dumps(ANSWER).encode()
        try:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the hook gave up waiting: what a slow endpoint sees

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/attribute"
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_a_real_http_endpoint_answers_and_may_override(server: str) -> None:
    _Handler.delay_s, _Handler.bodies = 0.0, []
    hook = AttributionHook(
        HookConfig(url=server, timeout_s=5, override=frozenset({Category.UNKNOWN}))
    )
    try:
        verdict = hook.review("9", 2, OURS, ())
    finally:
        hook.close()
    assert verdict.category is Category.GPU_HARDWARE and "applied" in verdict.basis
    assert _Handler.bodies[0]["attempt"] == 2


def test_a_slow_http_endpoint_times_out(server: str) -> None:
    _Handler.delay_s, _Handler.bodies = 3.0, []
    hook = AttributionHook(
        HookConfig(url=server, timeout_s=0.5, override=frozenset({Category.UNKNOWN}))
    )
    start = time.monotonic()
    try:
        verdict = hook.review("9", 2, OURS, ())
    finally:
        hook.close()
    assert time.monotonic() - start < 2.5
    assert verdict.category is Category.UNKNOWN and "external hook timeout" in verdict.basis


def test_a_refused_connection_is_an_error_not_a_delay() -> None:
    hook = AttributionHook(HookConfig(url="http://127.0.0.1:9/", timeout_s=2))
    try:
        outcome = hook.consult({"job_id": "1"})
    finally:
        hook.close()
    assert outcome.status == "error"


def test_the_service_records_the_hooks_answer_in_the_incident(tmp_path: Path) -> None:
    command = script(
        tmp_path,
        """
        import json, sys, time
        json.load(sys.stdin)
        print(json.dumps({"category": "gpu_hardware", "basis": "fleet health: GPU swapped"}))
        """,
    )
    config = Config(
        service=ServiceConfig(mode="monitor", state_dir=str(tmp_path)),
        attribution_hook=HookConfig(command=command, timeout_s=10),
    )
    store = Store(sqlite_url(str(tmp_path / "state.db")))
    kernel = tmp_path / "node1.kern.log"
    kernel.write_text("")
    (tmp_path / "job.out").write_text("")
    spec = JobSpec(log_paths=(str(tmp_path / "job.out"),), kernel_logs={"node1": str(kernel)})
    store.register_job("7", "fake", now=time.time(), spec=spec)
    sched = FakeScheduler()
    sched.add_job("7", ["node1"])
    service = Service(config, store, sched, executor_id="hook-test")
    service.cycle()
    stamp = datetime.now(UTC).isoformat()
    kernel.write_text(
        f"{stamp} node1 kernel: NVRM: Xid (PCI:0000:5e:00): 79, pid=1, name=python, "
        "GPU has fallen off the bus.\n"
    )
    sched.set_state("7", JobState.FAILED)
    service.cycle()
    time.sleep(0.6)
    decisions = service.cycle().decisions
    assert decisions, "no incident"
    (incident,) = store.list_incidents("7")
    assert incident.category is Category.GPU_HARDWARE
    assert "external hook: crash/gpu_hardware" in incident.basis
    assert "recorded, not applied" in incident.basis
