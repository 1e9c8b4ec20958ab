"""The API's trust boundary on a real uvicorn server on loopback (real sockets, real SQLite):
tokens for reads and writes, what ``POST /jobs`` may register, body limits, errors that never
echo the store, TLS, and what ``trainmedic serve`` says at startup."""

from __future__ import annotations

import dataclasses
import logging
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from trainmedic.api import create_app
from trainmedic.api.server import ApiServer, exposure_warnings
from trainmedic.core.badinput import BAD_INPUT, BadInput
from trainmedic.service.config import ApiConfig, Config, default_config
from trainmedic.store import Store, sqlite_url

pytestmark = pytest.mark.slow

WRITE = "write-token-abc"
READ = "read-token-def"


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _config(tmp_path: Path, *, write: str = WRITE, read: str = READ, **api: object) -> Config:
    base = default_config({"HOME": str(tmp_path)})
    service = dataclasses.replace(
        base.service, api_token=write, api_read_token=read, db_url=sqlite_url(str(tmp_path / "d"))
    )
    return dataclasses.replace(base, service=service, api=ApiConfig(**api))  # type: ignore[arg-type]


@pytest.fixture
def roots(tmp_path: Path) -> Path:
    root = tmp_path / "jobs"
    (root / "run1").mkdir(parents=True)
    return root


@pytest.fixture
def url(tmp_path: Path, roots: Path) -> Iterator[str]:
    config = _config(
        tmp_path,
        allowed_roots=(str(roots),),
        allowed_partitions=("gpu",),
        allowed_jobs=("train-*",),
        max_body_bytes=4096,
    )
    with ApiServer(create_app(Store(config.service.db_url), config)) as server:
        yield server.url


def test_reads_need_the_read_or_the_write_token(url: str) -> None:
    assert httpx.get(f"{url}/healthz").status_code == 200  # liveness stays open
    for path in ("/jobs", "/incidents", "/advice", "/nodes", "/metrics", "/jobs/x"):
        missing = httpx.get(url + path)
        assert missing.status_code == 401 and missing.headers["www-authenticate"] == "Bearer"
        assert httpx.get(url + path, headers=_auth("nope")).status_code == 403
    assert httpx.get(f"{url}/jobs", headers=_auth(READ)).json() == []
    assert httpx.get(f"{url}/jobs", headers=_auth(WRITE)).json() == []
    body = {"job_id": "train-1", "partition": "gpu"}
    refused = httpx.post(f"{url}/jobs", json=body, headers=_auth(READ))
    assert refused.status_code == 403  # the read token never writes
    assert httpx.post(f"{url}/jobs", json=body, headers=_auth(WRITE)).status_code == 201


def test_without_tokens_everything_but_health_is_refused(tmp_path: Path) -> None:
    config = _config(tmp_path, write="", read="")
    assert len(exposure_warnings(config)) == 1
    with ApiServer(create_app(Store(config.service.db_url), config)) as server:
        answer = httpx.get(f"{server.url}/jobs", headers=_auth("anything"))
        assert answer.status_code == 403
        assert answer.json() == {"detail": "reads are disabled: no token configured for them"}
        assert httpx.get(f"{server.url}/healthz").status_code == 200


def test_post_jobs_accepts_only_paths_under_the_allowed_roots(
    url: str, roots: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "secret.txt"
    outside.write_text("x")
    (roots / "run1" / "escape.log").symlink_to(outside)
    inside = str(roots / "run1" / "rank0.log")
    good = {
        "job_id": "train-7",
        "partition": "gpu",
        "log_paths": [inside],
        "kernel_logs": {"node1": str(roots / "node1.kern.log")},
        "checkpoint_dir": str(roots / "run1"),
    }
    created = httpx.post(f"{url}/jobs", json=good, headers=_auth(WRITE))
    assert created.status_code == 201, created.text
    refused = [
        ({"log_paths": ["/etc/shadow"]}, 403, "log_paths[0]: '/etc/shadow' is not under"),
        ({"log_paths": [f"{roots}/run1/../../secret.txt"]}, 403, "log_paths[0]"),
        ({"log_paths": [str(roots / "run1" / "escape.log")]}, 403, "log_paths[0]"),  # a link
        ({"log_paths": [f"{roots}-other/x.log"]}, 403, "log_paths[0]"),  # a sibling prefix
        ({"kernel_logs": {"node1": "/var/log/kern.log"}}, 403, "kernel_logs[node1]"),
        ({"checkpoint_dir": "/"}, 403, "checkpoint_dir"),
        ({"log_paths": ["run1/rank0.log"]}, 422, "not an absolute path"),
        ({"kernel_logs": {"-oProxyCommand=x": inside}}, 422, "body.kernel_logs"),
        ({"partition": "debug"}, 403, "partition: 'debug' is not in [api] allowed_partitions"),
        ({"job_id": "other-1"}, 403, "job_id: 'other-1' is not in [api] allowed_jobs"),
    ]
    for change, status, named in refused:
        answer = httpx.post(f"{url}/jobs", json={**good, **change}, headers=_auth(WRITE))
        assert answer.status_code == status, (change, answer.text)
        assert named in answer.json()["detail"], answer.text
    jobs = httpx.get(f"{url}/jobs", headers=_auth(READ)).json()
    assert [j["job_id"] for j in jobs] == ["train-7"]
    assert jobs[0]["spec"]["log_paths"] == [inside]


def test_bodies_are_size_limited_before_parsing_and_the_server_stays_up(url: str) -> None:
    before = BAD_INPUT.snapshot()[BadInput.API_BODY]
    big = b'{"job_id": "train-1", "name": "' + b"x" * 1_000_000 + b'"}'
    declared = httpx.post(
        f"{url}/jobs", content=big, headers={**_auth(WRITE), "content-type": "application/json"}
    )
    assert declared.status_code == 413
    assert declared.json() == {"detail": "request body over 4096 bytes"}

    def chunks() -> Iterator[bytes]:
        yield b'{"job_id": "train-1", "name": "'
        for _ in range(100):
            yield b"x" * 1000  # no Content-Length: counted as it arrives

    chunked = httpx.post(
        f"{url}/jobs",
        content=chunks(),
        headers={**_auth(WRITE), "content-type": "application/json"},
    )
    assert chunked.status_code == 413
    deep = b'{"job_id": "train-1", "policy": ' + b"[" * 2000 + b"]" * 2000 + b"}"
    nested = httpx.post(
        f"{url}/jobs", content=deep, headers={**_auth(WRITE), "content-type": "application/json"}
    )
    assert nested.status_code == 400 and "\n" not in nested.json()["detail"]  # not a 500
    assert httpx.get(f"{url}/healthz").status_code == 200
    assert BAD_INPUT.snapshot()[BadInput.API_BODY] - before == 2
    metrics = httpx.get(f"{url}/metrics", headers=_auth(READ)).text
    assert 'trainmedic_bad_input_total{kind="api_body"}' in metrics


def test_a_store_error_is_answered_without_its_message_and_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = _config(tmp_path)
    with ApiServer(create_app(Store(config.service.db_url), config)) as server:
        with sqlite3.connect(tmp_path / "d") as db:
            db.execute("DROP TABLE incidents")
        with caplog.at_level(logging.ERROR, logger="trainmedic.api.app"):
            answer = httpx.get(f"{server.url}/incidents", headers=_auth(READ))
        assert answer.status_code == 500
        detail = answer.json()["detail"]
        assert detail.startswith("store error (ref ") and detail.endswith("see the service log)")
        for leak in ("incidents", "SELECT", "sqlite", str(tmp_path)):
            assert leak not in detail
        assert "no such table: incidents" in caplog.text  # the operator still gets it


def _self_signed(tmp_path: Path) -> tuple[Path, Path]:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    argv = ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"]
    argv += ["-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"]
    subprocess.run(
        [*argv, "-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return cert, key


def test_tls_is_served_and_silences_the_exposure_warning(tmp_path: Path) -> None:
    cert, key = _self_signed(tmp_path)
    config = _config(tmp_path, tls_certfile=str(cert), tls_keyfile=str(key))
    exposed = dataclasses.replace(
        config, service=dataclasses.replace(config.service, api_host="0.0.0.0")
    )
    assert exposure_warnings(exposed) == []
    plain = dataclasses.replace(exposed, api=ApiConfig())
    (warning,) = exposure_warnings(plain)
    assert "beyond loopback without TLS" in warning
    app = create_app(Store(config.service.db_url), config)
    with ApiServer(app, ssl_certfile=str(cert), ssl_keyfile=str(key)) as server:
        assert server.url.startswith("https://")
        answer = httpx.get(f"{server.url}/jobs", headers=_auth(READ), verify=str(cert))
        assert answer.status_code == 200


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_serve_warns_when_exposed_and_never_prints_the_db_password(tmp_path: Path) -> None:
    port = _free_port()
    config = tmp_path / "tm.toml"
    config.write_text(
        f"""
[service]
state_dir = "{tmp_path / "state"}"
db_url = "sqlite:///{tmp_path / "tm.db"}?password=hunter2"
api_host = "0.0.0.0"
api_port = {port}
"""
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    env.pop("TRAINMEDIC_API_TOKEN", None)
    env.pop("TRAINMEDIC_API_READ_TOKEN", None)
    serve = subprocess.Popen(
        [sys.executable, "-m", "trainmedic.cli.main", "serve", "--config", str(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        serve.send_signal(signal.SIGTERM)
        out, err = serve.communicate(timeout=30)
    finally:
        if serve.poll() is None:
            serve.kill()
    assert "trainmedic serve:" in out and "password=***" in out
    assert "hunter2" not in out + err
    assert "beyond loopback without TLS" in err
    assert "no API token configured" in err
