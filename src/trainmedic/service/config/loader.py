"""The service config file: read, validated by ``core.tomlschema`` (unknown keys and wrong
types fail on load), then resolved against the environment.

The walk is generic over the dataclasses in ``sections`` (their type hints are the schema),
so the documented fields and what the loader accepts cannot drift apart. Every error is one
line naming the file and the key path, e.g.::

    /etc/trainmedic.toml: unknown key 'service.poll_s'; valid keys: mode, poll_interval_s, ...
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from trainmedic.core.errors import ConfigError
from trainmedic.core.policy.config import PolicyConfig
from trainmedic.core.tomlschema import as_plain_dict, build
from trainmedic.service.config.sections import DB_FILE_NAME, Config, ServiceConfig

TOKEN_ENV = "TRAINMEDIC_API_TOKEN"
READ_TOKEN_ENV = "TRAINMEDIC_API_READ_TOKEN"
STATE_DIR_ENV = "TRAINMEDIC_STATE_DIR"


def load_config(path: str | Path, env: Mapping[str, str] | None = None) -> Config:
    """Read, validate and resolve a TOML config file (see ``sections`` for every key)."""
    source = str(path)
    try:
        with open(path, "rb") as handle:
            data = tomllib.load(handle)
    except OSError as error:
        raise ConfigError(f"{source}: cannot read: {error.strerror or error}") from error
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{source}: not valid TOML: {error}") from error
    return _resolve(build(Config, data, source), os.environ if env is None else env)


def default_config(env: Mapping[str, str] | None = None) -> Config:
    """Every default, with state dir, database URL and token resolved from the environment."""
    return _resolve(Config(), os.environ if env is None else env)


def apply_policy_overrides(
    policy: PolicyConfig, overrides: Mapping[str, Any], source: str = "job policy"
) -> PolicyConfig:
    """A job's policy: ``policy`` with the keys of ``overrides`` (same names and types as the
    ``[policy]`` section, ``retry_budget`` as a table) replaced. Raises ConfigError."""
    merged = as_plain_dict(policy)
    for key, value in overrides.items():
        if key == "retry_budget" and isinstance(value, Mapping):
            merged[key] = {**merged[key], **value}
        else:
            merged[key] = value
    return build(PolicyConfig, merged, source, prefix="policy.")


def _resolve(config: Config, env: Mapping[str, str]) -> Config:
    """Fill the settings whose default depends on the environment."""
    service = config.service
    state_dir = service.state_dir or env.get(STATE_DIR_ENV, "") or _default_state_dir(env)
    state_dir = str(Path(state_dir).expanduser())
    db_url = service.db_url or f"sqlite:///{Path(state_dir) / DB_FILE_NAME}"
    token = service.api_token or env.get(TOKEN_ENV, "")
    read_token = service.api_read_token or env.get(READ_TOKEN_ENV, "")
    resolved: ServiceConfig = dataclasses.replace(
        service, state_dir=state_dir, db_url=db_url, api_token=token, api_read_token=read_token
    )
    return dataclasses.replace(config, service=resolved)


def _default_state_dir(env: Mapping[str, str]) -> str:
    base = env.get("XDG_STATE_HOME") or str(Path(env.get("HOME", "~")) / ".local" / "state")
    return str(Path(base) / "trainmedic")
