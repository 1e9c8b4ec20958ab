"""docs/grafana/trainmedic.json queries only metrics that /metrics really exposes (a real
uvicorn server over a real SQLite store, the webhook notifier's collector registered)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx
import pytest

from trainmedic.api import create_app
from trainmedic.api.server import ApiServer
from trainmedic.service.config import default_config
from trainmedic.service.config.sections import NotifyConfig
from trainmedic.service.notify import Notifier
from trainmedic.store import Store, sqlite_url

pytestmark = pytest.mark.slow

DASHBOARD = Path(__file__).resolve().parents[2] / "docs" / "grafana" / "trainmedic.json"
METRIC = re.compile(r"\btrainmedic_[a-z_]+\b")


def _queried() -> set[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    assert exprs, "the dashboard queries nothing"
    return {m for e in exprs for m in METRIC.findall(e)}


def _exposed(text: str) -> set[str]:
    """Every sample name, and every family name with the suffixes its type allows."""
    names: set[str] = set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, family, kind = line.split()
            names.add(family)
            if kind == "counter":
                names.add(family + "_total")
            if kind == "histogram":
                names.update(family + s for s in ("_bucket", "_sum", "_count"))
        elif line and not line.startswith("#"):
            names.add(re.split(r"[{ ]", line, maxsplit=1)[0])
    return names


def test_every_metric_the_dashboard_queries_exists(tmp_path: Path) -> None:
    notifier = Notifier(NotifyConfig(json_urls=("http://127.0.0.1:9/hook",)))
    app = create_app(
        Store(sqlite_url(str(tmp_path / "tm.db"))),
        default_config({"HOME": str(tmp_path), "TRAINMEDIC_API_READ_TOKEN": "r"}),
        collectors=[notifier.collector()],
    )
    with ApiServer(app) as server:
        text = httpx.get(f"{server.url}/metrics", headers={"Authorization": "Bearer r"}).text
    notifier.close(1)
    missing = sorted(_queried() - _exposed(text))
    assert not missing, f"the dashboard queries metrics /metrics lacks: {missing}"
    assert {"trainmedic_job_downtime_seconds", "trainmedic_badput_seconds"} <= _queried()


def test_a_renamed_metric_would_be_caught() -> None:
    assert "trainmedic_no_such_metric" not in _exposed("# TYPE trainmedic_advice gauge\n")
    assert "trainmedic_incidents_total" in _exposed("# TYPE trainmedic_incidents counter\n")
