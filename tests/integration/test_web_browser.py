"""The web view end to end in real headless Chromium (Debian's ``chromium``, driven by
Playwright): a real monitor-mode demo run (torchrun DDP training, injected GPU crash and hang,
the real service), then the service's HTTP app over the demo's store, then the pages as a
person uses them: the cluster page, the job's timeline with the injected incidents, the
scorecard form recording an answer that the API then returns, and the node page; and
``trainmedic serve`` serving them.

Screenshots of the three pages (job and cluster after the answer) go to
``$TRAINMEDIC_SCREENSHOTS`` (the committed ones in
docs/screenshots/ were made with ``TRAINMEDIC_SCREENSHOTS=docs/screenshots``), else to the
test's temporary directory.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from trainmedic.api import create_app
from trainmedic.api.server import ApiServer
from trainmedic.service.config import default_config
from trainmedic.store import Store, sqlite_url

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
TOKEN = "browser-test-token"
READ = {"Authorization": f"Bearer {TOKEN}"}  # the write token reads too


@dataclass
class Served:
    url: str
    report: dict[str, Any]
    shots: Path


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} missing: scripts/bootstrap.sh installs Debian's chromium")
    work = tmp_path_factory.mktemp("webdemo")
    report_path = work / "report.json"
    demo = subprocess.run(
        [sys.executable, "-m", "trainmedic.cli.main", "demo", "--mode", "monitor",
         "--faults", "xid79,hang", "--workdir", str(work / "demo"),
         "--report", str(report_path), "--no-api"],
        capture_output=True, text=True, timeout=540,
    )  # fmt: skip
    assert demo.returncode == 0, demo.stdout[-3000:] + demo.stderr[-3000:]
    # The service's own API app over the demo's store. Not `trainmedic serve` itself: its
    # loop would watch the demo's finished job through a fresh local scheduler that no longer
    # knows it (see test_serve_serves_the_pages for serve).
    base = default_config({"HOME": str(work)})
    config = dataclasses.replace(
        base, service=dataclasses.replace(base.service, mode="monitor", api_token=TOKEN)
    )
    store = Store(sqlite_url(str(work / "demo" / "state.db")))
    try:
        with ApiServer(create_app(store, config)) as server:
            shots = Path(os.environ.get("TRAINMEDIC_SCREENSHOTS") or work / "screenshots")
            shots.mkdir(parents=True, exist_ok=True)
            yield Served(server.url, json.loads(report_path.read_text()), shots)
    finally:
        store.close()
        shutil.rmtree(work / "demo" / "run", ignore_errors=True)


@pytest.fixture(scope="module")
def browser(served: Served) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    # Reads need a token (the write token reads too): the browser sends it as a bearer header.
    context = browser.new_context(
        viewport={"width": 1360, "height": 900},
        extra_http_headers={"Authorization": f"Bearer {TOKEN}"},
    )
    try:
        yield context.new_page()
    finally:
        context.close()


def _job_id(served: Served) -> str:
    return str(served.report["job_id"])


def test_cluster_page_renders_with_its_chart(served: Served, page: Any) -> None:
    page.goto(f"{served.url}/ui")
    assert page.title() == "trainmedic"
    job_link = page.locator(f'#jobs a[href="/ui/jobs/{_job_id(served)}"]')
    assert job_link.count() == 1
    # Monitor mode: the demo's advice waits for an operator's answer.
    assert page.locator("#advice-waiting tbody tr a").count() >= 2
    page.wait_for_selector("#badput-chart[data-drawn]")
    badput = page.locator("#badput").inner_text()
    assert "gpu hardware" in badput and "unknown" in badput


def test_job_timeline_shows_the_injected_incidents(served: Served, page: Any) -> None:
    page.goto(f"{served.url}/ui")
    page.click(f'#jobs a[href="/ui/jobs/{_job_id(served)}"]')
    page.wait_for_selector("#timeline")
    stored = httpx.get(
        f"{served.url}/incidents", params={"job_id": _job_id(served)}, headers=READ
    ).json()
    assert page.locator("#timeline .marker").count() == len(stored)
    # Beyond the injected faults only straggler reports may come (noisy shared cores).
    assert len(stored) >= len(served.report["incidents"])
    injected_at = {i["detected_at"] for i in served.report["incidents"]}
    assert all(i["kind"] == "straggler" for i in stored if i["detected_at"] not in injected_at)
    for injected in served.report["incidents"]:
        kind, category = injected["kind"], injected["category"].replace("_", " ")
        heading = page.locator("article.incident h4", has_text=f"{kind} / {category}")
        assert heading.count() >= 1, f"{kind} / {category} not on the job page"
    xid = page.locator("article.incident", has_text="crash / gpu hardware").first
    assert "Basis:" in xid.inner_text() and "monitor mode: recorded" in xid.inner_text()
    page.wait_for_selector("#parts-chart[data-drawn]")
    accounting = httpx.get(f"{served.url}/jobs/{_job_id(served)}/accounting", headers=READ).json()
    rows = page.locator("#interruptions tbody tr")
    assert rows.count() == len(accounting["interruptions"]) >= 2  # the crash and the hang
    causes = page.locator("#interruptions").inner_text()
    assert "gpu hardware (crash)" in causes and "unknown (hang)" in causes


def test_scorecard_form_records_an_answer_the_api_returns(served: Served, page: Any) -> None:
    page.goto(f"{served.url}/ui/jobs/{_job_id(served)}")
    form = page.locator("form.feedback").first
    advice_id = int(form.get_attribute("action").split("/")[3])
    form.locator('input[name="agree"][value="yes"]').check()
    form.locator('select[name="action_taken"]').select_option("restart")
    form.locator('input[name="note"]').fill("plain requeue by hand")
    form.locator('input[name="by"]').fill("playwright")
    form.locator('input[name="api_token"]').fill(TOKEN)
    form.locator('button[type="submit"]').click()
    page.wait_for_selector('[role="status"]')
    assert "Answer recorded" in page.locator(f"#advice-{advice_id}").inner_text()
    page.wait_for_selector("#parts-chart[data-drawn]")
    page.screenshot(path=str(served.shots / "job.png"), full_page=True)
    answers = httpx.get(f"{served.url}/advice/{advice_id}/feedback", headers=READ).json()
    assert [(a["agree"], a["action_taken"], a["by"]) for a in answers] == [
        (True, "restart", "playwright")
    ]
    page.goto(f"{served.url}/ui")
    assert "100.0 %" in page.locator("#scorecard-1").inner_text()
    page.wait_for_selector("#badput-chart[data-drawn]")
    page.screenshot(path=str(served.shots / "cluster.png"), full_page=True)
    # A wrong write token is refused and records nothing.
    page.goto(f"{served.url}/ui/jobs/{_job_id(served)}")
    form = page.locator("form.feedback").first
    form.locator('input[name="agree"][value="no"]').check()
    form.locator('input[name="api_token"]').fill("wrong")
    form.locator('button[type="submit"]').click()
    assert "write token" in page.locator('[role="alert"]').inner_text()
    assert len(httpx.get(f"{served.url}/advice/{advice_id}/feedback", headers=READ).json()) == 1


def test_node_page_shows_the_history(served: Served, page: Any) -> None:
    xid = next(i for i in served.report["incidents"] if i["fault"] == "xid79")
    node = xid["implicated_nodes"][0]
    page.goto(f"{served.url}/ui/jobs/{_job_id(served)}")
    page.goto(f"{served.url}/ui/nodes/{node}")
    history = page.locator("#history tbody").inner_text()
    assert "gpu hardware" in history and _job_id(served) in history
    page.screenshot(path=str(served.shots / "node.png"), full_page=True)


def test_serve_serves_the_pages(tmp_path: Path, browser: Any) -> None:
    """`trainmedic serve` (loop and API in one process) serves the web view."""
    port = _free_port()
    config = tmp_path / "serve.toml"
    config.write_text(
        f'[service]\nstate_dir = "{tmp_path}"\napi_port = {port}\napi_token = "{TOKEN}"\n'
    )
    serve = subprocess.Popen(
        [sys.executable, "-m", "trainmedic.cli.main", "serve", "--config", str(config)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert serve.poll() is None, serve.stdout.read() if serve.stdout else ""
            assert time.monotonic() < deadline, "trainmedic serve did not answer"
            time.sleep(0.3)
        context = browser.new_context(extra_http_headers={"Authorization": f"Bearer {TOKEN}"})
        page = context.new_page()
        page.goto(url)  # / redirects to the cluster page
        assert page.url == f"{url}/ui"
        assert "no jobs watched" in page.locator("#jobs").inner_text()
        context.close()
    finally:
        serve.terminate()
        serve.wait(timeout=30)
