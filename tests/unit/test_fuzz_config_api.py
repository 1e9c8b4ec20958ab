"""Property-based tests (hypothesis) of the config loader (TOML text and tables) and of the
API's request bodies (in-process ASGI client over the real app and a real SQLite store).

A config is either loaded or refused with one ConfigError line; a request body is answered
with a one-line 2xx/4xx, never a 500 or a traceback."""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
import typing
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trainmedic.api import create_app
from trainmedic.core.errors import ConfigError
from trainmedic.core.tomlschema import build
from trainmedic.service.config import ApiConfig, Config, default_config, load_config
from trainmedic.store import Store, sqlite_url

# More with TRAINMEDIC_FUZZ_EXAMPLES=2000 (the default keeps the unit suite quick).
EXAMPLES = int(os.environ.get("TRAINMEDIC_FUZZ_EXAMPLES", "100"))
FUZZ = settings(max_examples=EXAMPLES, deadline=3000, suppress_health_check=[HealthCheck.too_slow])

SECTIONS = ["service", "watch", "policy", "detect", "scheduler", "scheduler.slurm", "api", "x"]


def _schema_keys() -> list[str]:
    """Every key of every config table (the dataclass fields, walked)."""
    keys, pending = [], [Config]
    while pending:
        cls = pending.pop()
        hints = typing.get_type_hints(cls)
        for field in dataclasses.fields(cls):
            keys.append(field.name)
            if isinstance(hints[field.name], type) and dataclasses.is_dataclass(hints[field.name]):
                pending.append(hints[field.name])
    return keys


KEYS = _schema_keys()
KEYS += ["retry_budget", "hardware", "unknown_key", "poll_s"]
TOML_VALUES = [
    '"action"', '"monitor"', "0", "-1", "1e400", "nan", "inf", "3", "true", '""', '"/x"',
    '["a", "b"]', "[1, 2]", "{ a = 1 }", '"[unclosed"', '"relative/path"', "9" * 30, '"0.0.0.0"',
]  # fmt: skip
TOML_LINES = st.one_of(
    st.sampled_from(SECTIONS).map(lambda s: f"[{s}]"),
    st.tuples(st.sampled_from(KEYS), st.sampled_from(TOML_VALUES)).map(" = ".join),
    st.text(max_size=20),
)


@FUZZ
@given(st.lists(TOML_LINES, max_size=12).map("\n".join))
def test_any_config_text_is_loaded_or_refused_with_one_line(text: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "c.toml"
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        try:
            config = load_config(path, env={"HOME": tmp})
        except ConfigError as error:
            assert "\n" not in str(error) and str(path) in str(error)
            return
        assert isinstance(config, Config)


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner),
    max_leaves=10,
)


@FUZZ
@given(
    st.dictionaries(st.sampled_from(SECTIONS), st.dictionaries(st.sampled_from(KEYS), JSON_VALUES))
)
def test_any_config_table_is_built_or_refused(tables: dict[str, dict[str, Any]]) -> None:
    try:
        build(Config, tables, "fuzz")
    except ConfigError as error:
        assert "\n" not in str(error)


def _client() -> TestClient:
    tmp = tempfile.mkdtemp()
    base = default_config({"HOME": tmp})
    service = dataclasses.replace(
        base.service, api_token="w", api_read_token="r", db_url=sqlite_url(os.path.join(tmp, "d"))
    )
    api = ApiConfig(allowed_roots=(tmp,), allowed_partitions=("gpu", ""), max_body_bytes=8192)
    config = dataclasses.replace(base, service=service, api=api)
    return TestClient(create_app(Store(service.db_url), config), raise_server_exceptions=False)


CLIENT = _client()
JOB_FIELDS = ["job_id", "scheduler", "name", "log_paths", "kernel_logs", "checkpoint_dir"]
JOB_FIELDS += ["nodes", "partition", "user", "policy", "surprise"]
BODIES = st.one_of(
    st.dictionaries(st.sampled_from(JOB_FIELDS), JSON_VALUES),
    st.fixed_dictionaries({"job_id": st.from_regex(r"[A-Za-z0-9_.:@+-]{1,20}", fullmatch=True)}),
    JSON_VALUES,
)
OK = {200, 201, 400, 403, 404, 409, 413, 422}


@FUZZ
@given(BODIES)
def test_any_job_registration_body_gets_a_one_line_answer(body: object) -> None:
    answer = CLIENT.post("/jobs", content=json.dumps(body), headers={"Authorization": "Bearer w"})
    assert answer.status_code in OK, answer.text
    if answer.status_code >= 400:
        detail = answer.json()["detail"]
        assert isinstance(detail, str) and "\n" not in detail


@FUZZ
@given(
    st.dictionaries(
        st.sampled_from(["status", "executor_id", "steps_done", "applied", "note", "x"]),
        JSON_VALUES | st.sampled_from(["applying", "converged", "pending", "abandoned"]),
    ),
    st.integers(-(2**70), 2**70),
)
def test_any_reconciliation_body_gets_a_one_line_answer(body: object, advice_id: int) -> None:
    answer = CLIENT.post(
        f"/advice/{advice_id}/reconciliation",
        content=json.dumps(body),
        headers={"Authorization": "Bearer w"},
    )
    assert answer.status_code in OK, answer.text
    assert "\n" not in answer.json()["detail"]
