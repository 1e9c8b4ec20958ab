"""TOML tables -> frozen dataclasses, strictly: the one loader for config, catalogue and rules.

The dataclass's type hints are the schema, so what is documented and what is accepted cannot
drift apart. Unknown keys fail with the list of valid ones, a missing required key (a field
without a default) fails, and a wrong type fails; every error is one ``ConfigError`` line
naming the source and the key path, e.g.::

    /etc/trainmedic.toml: unknown key 'service.poll_s'; valid keys: mode, poll_interval_s, ...

Supported field types: nested dataclasses, ``Literal[...]``, ``str`` enums, ``tuple[X, ...]``,
``frozenset[X]``, ``dict[str, X]`` (a table with free keys), ``X | None`` (None means
"absent"), ``bool``, ``int``, ``float`` and ``str``.
Pure: it reads only the mapping it is given (``tomllib`` parsing included, from text).
"""

from __future__ import annotations

import dataclasses
import enum
import tomllib
import types
import typing
from collections.abc import Mapping
from typing import Any, Literal, TypeVar

from trainmedic.core.errors import ConfigError

T = TypeVar("T")


def parse_toml(text: str, source: str) -> dict[str, Any]:
    """``tomllib.loads`` with its error translated to one line naming ``source``."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{source}: not valid TOML: {error}") from error


def build(cls: type[T], table: Mapping[str, Any], source: str, prefix: str = "") -> T:
    """Build dataclass ``cls`` from a TOML table, checking keys and types field by field."""
    hints = typing.get_type_hints(cls)
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    names = [f.name for f in fields]
    for key in table:
        if key not in names:
            raise ConfigError(
                f"{source}: unknown key '{prefix}{key}'; valid keys: {', '.join(names)}"
            )
    missing = [
        f.name
        for f in fields
        if f.name not in table
        and f.default is dataclasses.MISSING
        and f.default_factory is dataclasses.MISSING
    ]
    if missing:
        raise ConfigError(
            f"{source}: missing key(s) {', '.join(prefix + name for name in missing)}"
        )
    values = {
        name: convert(hints[name], table[name], f"{prefix}{name}", source)
        for name in names
        if name in table
    }
    try:
        return cls(**values)
    except ValueError as error:
        raise ConfigError(f"{source}: {error}") from error


def convert(hint: Any, value: Any, key: str, source: str) -> Any:
    """``value`` checked against (and converted to) type ``hint``."""
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        if not isinstance(value, Mapping):
            raise _type_error(source, key, "a table", value)
        return build(hint, value, source, prefix=f"{key}.")
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        try:
            return hint(value)
        except ValueError:
            valid = ", ".join(str(member.value) for member in hint)
            raise ConfigError(f"{source}: {key} {value!r} is not one of: {valid}") from None
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is types.UnionType or origin is typing.Union:
        options = [a for a in args if a is not type(None)]
        if len(options) == 1:
            return convert(options[0], value, key, source)
        raise ConfigError(f"{source}: {key}: unsupported config type {hint!r}")  # a code bug
    if origin is Literal:
        if value not in args:
            choices = " | ".join(repr(a) for a in args)
            raise ConfigError(f"{source}: {key} must be one of {choices}, got {value!r}")
        return value
    if origin is dict:
        if not isinstance(value, Mapping):
            raise _type_error(source, key, "a table", value)
        return {str(k): convert(args[1], v, f"{key}.{k}", source) for k, v in value.items()}
    if origin in (tuple, frozenset):
        if not isinstance(value, list):
            raise _type_error(source, key, "an array", value)
        items = (convert(args[0], v, f"{key}[{i}]", source) for i, v in enumerate(value))
        return tuple(items) if origin is tuple else frozenset(items)
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


def table_list(
    data: Mapping[str, Any], key: str, source: str, *, required: bool = True
) -> list[dict[str, Any]]:
    """The array of tables ``[[key]]`` in ``data``."""
    value = data.get(key, None if required else [])
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        raise ConfigError(f"{source}: {key} must be an array of tables ([[{key}]])")
    return value


def as_plain_dict(obj: Any) -> dict[str, Any]:
    """A dataclass as TOML-shaped data (tuples as lists, enums as values) that ``build``
    accepts back."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if dataclasses.is_dataclass(value):
            out[f.name] = as_plain_dict(value)
        elif isinstance(value, tuple | frozenset):
            out[f.name] = list(value)
        elif isinstance(value, enum.Enum):
            out[f.name] = value.value
        else:
            out[f.name] = value
    return out


def _type_error(source: str, key: str, expected: str, value: Any) -> ConfigError:
    return ConfigError(f"{source}: {key} must be {expected}, got {type(value).__name__} {value!r}")
