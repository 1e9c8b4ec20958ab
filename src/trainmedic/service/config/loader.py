"""TOML -> frozen dataclasses, strictly: unknown keys and wrong types fail on load.

The walk is generic over the dataclasses in ``sections`` (their type hints are the schema),
so the documented fields and what the loader accepts cannot drift apart. Every error is one
line naming the file and the key path, e.g.::

    /etc/trainmedic.toml: unknown key 'service.poll_s'; valid keys: mode, poll_interval_s, ...
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, TypeVar

from trainmedic.core.errors import ConfigError
from trainmedic.service.config.sections import DB_FILE_NAME, Config, PolicyConfig, ServiceConfig

T = TypeVar("T")

TOKEN_ENV = "TRAINMEDIC_API_TOKEN"
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
    merged = _as_plain_dict(policy)
    for key, value in overrides.items():
        if key == "retry_budget" and isinstance(value, Mapping):
            merged[key] = {**merged[key], **value}
        else:
            merged[key] = value
    return build(PolicyConfig, merged, source, prefix="policy.")


def build(cls: type[T], table: Mapping[str, Any], source: str, prefix: str = "") -> T:
    """Build dataclass ``cls`` from a TOML table, checking keys and types field by field."""
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
    for key in table:
        if key not in names:
            raise ConfigError(
                f"{source}: unknown key '{prefix}{key}'; valid keys: {', '.join(names)}"
            )
    values = {
        name: _convert(hints[name], table[name], f"{prefix}{name}", source)
        for name in names
        if name in table
    }
    try:
        return cls(**values)
    except ValueError as error:
        raise ConfigError(f"{source}: {error}") from error


def _convert(hint: Any, value: Any, key: str, source: str) -> Any:
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        if not isinstance(value, Mapping):
            raise _type_error(source, key, "a table", value)
        return build(hint, value, source, prefix=f"{key}.")
    origin = typing.get_origin(hint)
    if origin is Literal:
        allowed = typing.get_args(hint)
        if value not in allowed:
            choices = " | ".join(repr(a) for a in allowed)
            raise ConfigError(f"{source}: {key} must be one of {choices}, got {value!r}")
        return value
    if origin is tuple:
        (item,) = typing.get_args(hint)[:1]
        if not isinstance(value, list):
            raise _type_error(source, key, "an array", value)
        return tuple(_convert(item, v, f"{key}[{i}]", source) for i, v in enumerate(value))
    if hint is bool:
        if not isinstance(value, bool):
            raise _type_error(source, key, "true or false", value)
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise _type_error(source, key, "an integer", value)
        return value
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise _type_error(source, key, "a number", value)
        return float(value)
    if hint is str:
        if not isinstance(value, str):
            raise _type_error(source, key, "a string", value)
        return value
    raise ConfigError(f"{source}: {key}: unsupported config type {hint!r}")  # a code bug


def _type_error(source: str, key: str, expected: str, value: Any) -> ConfigError:
    return ConfigError(f"{source}: {key} must be {expected}, got {type(value).__name__} {value!r}")


def _as_plain_dict(obj: Any) -> dict[str, Any]:
    """A dataclass as TOML-shaped data (tuples as lists) that ``build`` accepts back."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if dataclasses.is_dataclass(value):
            out[f.name] = _as_plain_dict(value)
        elif isinstance(value, tuple):
            out[f.name] = list(value)
        else:
            out[f.name] = value
    return out


def _resolve(config: Config, env: Mapping[str, str]) -> Config:
    """Fill the settings whose default depends on the environment."""
    service = config.service
    state_dir = service.state_dir or env.get(STATE_DIR_ENV, "") or _default_state_dir(env)
    state_dir = str(Path(state_dir).expanduser())
    db_url = service.db_url or f"sqlite:///{Path(state_dir) / DB_FILE_NAME}"
    token = service.api_token or env.get(TOKEN_ENV, "")
    resolved: ServiceConfig = dataclasses.replace(
        service, state_dir=state_dir, db_url=db_url, api_token=token
    )
    return dataclasses.replace(config, service=resolved)


def _default_state_dir(env: Mapping[str, str]) -> str:
    base = env.get("XDG_STATE_HOME") or str(Path(env.get("HOME", "~")) / ".local" / "state")
    return str(Path(base) / "trainmedic")
