"""The API's settings: the read token (file or environment), the ``[api]`` table and what it
refuses, and the startup warnings about exposure."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from trainmedic.api.server import exposure_warnings, is_loopback
from trainmedic.core.errors import ConfigError
from trainmedic.service.config import default_config, load_config


def _load(tmp_path: Path, text: str, env: dict[str, str] | None = None) -> object:
    path = tmp_path / "tm.toml"
    path.write_text(text)
    return load_config(path, env={"HOME": str(tmp_path), **(env or {})})


def test_read_token_from_file_or_environment(tmp_path: Path) -> None:
    env = {"TRAINMEDIC_API_READ_TOKEN": "from-env", "TRAINMEDIC_API_TOKEN": "w"}
    from_env = default_config({"HOME": str(tmp_path), **env})
    assert (from_env.service.api_read_token, from_env.service.api_token) == ("from-env", "w")
    in_file = _load(tmp_path, '[service]\napi_read_token = "file"\n', env)
    assert in_file.service.api_read_token == "file"  # type: ignore[attr-defined]


def test_api_table_loads(tmp_path: Path) -> None:
    config = _load(
        tmp_path,
        '[api]\nallowed_roots = ["/data/jobs"]\nallowed_partitions = ["gpu"]\n'
        'allowed_jobs = ["train-*"]\nmax_body_bytes = 8192\n',
    )
    api = config.api  # type: ignore[attr-defined]
    assert (api.allowed_roots, api.allowed_partitions, api.allowed_jobs) == (
        ("/data/jobs",),
        ("gpu",),
        ("train-*",),
    )
    assert api.max_body_bytes == 8192 and not api.tls


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ('[api]\nallowed_roots = ["data/jobs"]\n', "api.allowed_roots must be absolute"),
        ("[api]\nmax_body_bytes = 10\n", "api.max_body_bytes must be >= 1024"),
        ('[api]\ntls_certfile = "/c.pem"\n', "go together"),
        ("[api]\nallowed_root = []\n", "unknown key 'api.allowed_root'"),
    ],
)
def test_bad_api_settings_are_one_line_errors(tmp_path: Path, text: str, named: str) -> None:
    with pytest.raises(ConfigError, match=named.replace("(", r"\(")):
        _load(tmp_path, text)


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("::1", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("::", False),
        ("10.0.0.5", False),
        ("head01", False),
    ],
)
def test_exposure_warning_beyond_loopback(host: str, loopback: bool) -> None:
    base = default_config({"HOME": "/x", "TRAINMEDIC_API_READ_TOKEN": "r"})
    config = dataclasses.replace(base, service=dataclasses.replace(base.service, api_host=host))
    assert is_loopback(host) is loopback
    warned = any("without TLS" in w for w in exposure_warnings(config))
    assert warned is not loopback
