"""``[telemetry]``: where each node's DCGM exporter is, how often and how long to scrape."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainmedic.core.errors import ConfigError
from trainmedic.service.config import default_config, load_config

ENV = {"HOME": "/home/u"}


def test_off_by_default() -> None:
    telemetry = default_config(ENV).telemetry
    assert not telemetry.enabled and telemetry.url_of("node1") is None
    assert (telemetry.scrape_interval_s, telemetry.timeout_s) == (10.0, 2.0)


def test_template_and_per_node_urls(tmp_path: Path) -> None:
    path = tmp_path / "tm.toml"
    path.write_text(
        '[telemetry]\ndcgm_url_template = "http://{node}:9400/metrics"\n'
        "scrape_interval_s = 5\ntimeout_s = 0.5\n"
        '[telemetry.dcgm_urls]\ngpu-07 = "http://10.0.0.7:9500/metrics"\n'
    )
    telemetry = load_config(path, ENV).telemetry
    assert telemetry.enabled and telemetry.scrape_interval_s == 5.0
    assert telemetry.url_of("gpu-01") == "http://gpu-01:9400/metrics"
    assert telemetry.url_of("gpu-07") == "http://10.0.0.7:9500/metrics"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('dcgm_url_template = "http://host:9400/metrics"', "must contain {node}"),
        ('dcgm_urls = "http://x"', "telemetry.dcgm_urls must be a table"),
        ("dcgm_urls = { node1 = 9400 }", "telemetry.dcgm_urls.node1 must be a string"),
        ("timeout_s = 0", "telemetry.timeout_s"),
        ("scrape_s = 1", "unknown key 'telemetry.scrape_s'"),
    ],
)
def test_bad_telemetry_config_is_one_clear_line(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "tm.toml"
    path.write_text(f"[telemetry]\n{text}\n")
    with pytest.raises(ConfigError, match=expected.replace("{", r"\{").replace("}", r"\}")) as info:
        load_config(path, ENV)
    assert "\n" not in str(info.value)
