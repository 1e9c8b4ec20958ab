"""The signature catalogue: log-line patterns kept as data (catalogue.toml), loaded strictly.

Every entry names a failure mechanism, not a file: its regexes, what the line says about
causality (``role``), a suggested action and whether it is strong enough to drain a node.
The Xid table (NVSentinel's buckets) lives in the same file, so one table serves every caller.

Named capture groups a pattern may use (anything else is a ConfigError):

============  ==============================================================================
node          host name of the node the line implicates (not a reporting or server host)
rank          global rank the line is about (failed, absent): not always the printer
local_rank    rank within its node
gpu           GPU index or UUID
pci           PCI address of a GPU (``0000:3b:00``), normalised; never a NIC or root port
xid           NVIDIA Xid number (looked up in the Xid table)
exitcode      process exit code (``-9``, ``1``)
signal        signal name (``SIGKILL``) or number
seqnum        collective sequence number (for ``nccl.last_completed``: the last completed)
optype        collective type (``ALLREDUCE``)
peer          remote address of a network peer (``10.0.0.2``)
status        transport status code (IB work-completion status)
vendor_err    IB vendor error code
path          file path the line is about
pid           process id
jobid         scheduler job or step id
============  ==============================================================================
"""

from __future__ import annotations

import functools
import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

from trainmedic.core.errors import ConfigError
from trainmedic.core.model import ActionHint, Category, Kind, Role

ALLOWED_GROUPS = frozenset(
    {
        "node",
        "rank",
        "local_rank",
        "gpu",
        "pci",
        "xid",
        "exitcode",
        "signal",
        "seqnum",
        "optype",
        "peer",
        "status",
        "vendor_err",
        "path",
        "pid",
        "jobid",
    }
)

_SIGNATURE_KEYS = frozenset(
    {
        "id",
        "patterns",
        "category",
        "kind",
        "role",
        "action_hint",
        "strong",
        "keywords",
        "examples",
        "counter_examples",
        "description",
    }
)
_REQUIRED_SIGNATURE_KEYS = _SIGNATURE_KEYS - {"counter_examples"}
_XID_KEYS = frozenset({"codes", "name", "category", "kind", "role", "action_hint", "strong"})
_TOP_KEYS = frozenset({"signature", "include", "xid", "xid_default", "healthy_lines"})
_REQUIRED_TOP_KEYS = frozenset({"xid", "xid_default"})
_INCLUDE_NAME = re.compile(r"^[\w.-]+\.toml$")
_E = TypeVar("_E", Category, Kind, Role, ActionHint)
_ID_SHAPE = re.compile(r"^[a-z0-9_]+(?:\.[a-z0-9_]+)+$")


@dataclass(frozen=True, slots=True)
class Signature:
    """One failure mechanism as it shows in a log line."""

    id: str
    patterns: tuple[str, ...]
    category: Category
    kind: Kind
    role: Role
    action_hint: ActionHint
    strong: bool
    keywords: tuple[str, ...]
    examples: tuple[str, ...]
    counter_examples: tuple[str, ...]
    description: str


@dataclass(frozen=True, slots=True)
class XidRule:
    """What one NVIDIA Xid number means for the node and the job (NVSentinel's buckets)."""

    codes: tuple[int, ...]
    name: str
    category: Category
    kind: Kind
    role: Role
    action_hint: ActionHint
    strong: bool


@dataclass(frozen=True, slots=True)
class Catalogue:
    """The loaded catalogue: signatures in file order, the Xid table, and ``healthy_lines``:
    text typical of healthy logs (the matcher keeps its prefilter anchors out of it)."""

    signatures: tuple[Signature, ...]
    xid_rules: tuple[XidRule, ...]
    xid_default: XidRule
    healthy_lines: tuple[str, ...] = ()

    def by_id(self, signature_id: str) -> Signature:
        for signature in self.signatures:
            if signature.id == signature_id:
                return signature
        raise KeyError(signature_id)

    def xid_rule(self, xid: int) -> XidRule:
        """The rule for ``xid``; unknown numbers get the default (contact support)."""
        for rule in self.xid_rules:
            if xid in rule.codes:
                return rule
        return self.xid_default


def load_catalogue(path: Path | None = None) -> Catalogue:
    """Load and validate a catalogue; ``None`` means the packaged one (cached). Files named in
    its ``include`` list are read from the same directory."""
    if path is None:
        return _default_catalogue()
    return parse_catalogue(_read(path), str(path), lambda name: _read(path.parent / name))


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read signature catalogue: {exc}") from exc


@functools.cache
def _default_catalogue() -> Catalogue:
    package = resources.files("trainmedic.core.signatures")

    def read(name: str) -> str:
        try:
            return package.joinpath(name).read_text("utf-8")
        except OSError as exc:
            raise ConfigError(f"{name}: cannot read packaged catalogue part: {exc}") from exc

    return parse_catalogue(read("catalogue.toml"), "catalogue.toml", read)


def parse_catalogue(
    text: str, origin: str, read_include: Callable[[str], str] | None = None
) -> Catalogue:
    """Parse catalogue TOML ``text``; ``origin`` names it in error messages. ``read_include``
    returns the text of a file named in ``include`` (which holds only [[signature]] tables)."""
    data = _parse_toml(text, origin)
    _check_keys(data, _TOP_KEYS, _REQUIRED_TOP_KEYS, origin)
    parts = [(origin, data)]
    for name in _str_list(data, "include", origin, required=False):
        if not _INCLUDE_NAME.match(name) or read_include is None:
            raise ConfigError(f"{origin}: cannot include {name!r} (a sibling *.toml file name)")
        part = _parse_toml(read_include(name), name)
        _check_keys(part, frozenset({"signature"}), frozenset({"signature"}), name)
        parts.append((name, part))
    signatures = tuple(
        _parse_signature(entry, f"{name}: signature #{i + 1}")
        for name, part in parts
        for i, entry in enumerate(_table_list(part, "signature", name, required=False))
    )
    seen: set[str] = set()
    for signature in signatures:
        if signature.id in seen:
            raise ConfigError(f"{origin}: duplicate signature id {signature.id!r}")
        seen.add(signature.id)
    xid_rules = tuple(
        _parse_xid(entry, f"{origin}: xid #{i + 1}", with_codes=True)
        for i, entry in enumerate(_table_list(data, "xid", origin))
    )
    codes = [code for rule in xid_rules for code in rule.codes]
    if len(codes) != len(set(codes)):
        raise ConfigError(f"{origin}: an Xid number appears in two xid rules")
    default = data["xid_default"]
    if not isinstance(default, dict):
        raise ConfigError(f"{origin}: xid_default must be a table")
    xid_default = _parse_xid(default, f"{origin}: xid_default", with_codes=False)
    healthy = tuple(_str_list(data, "healthy_lines", origin, required=False))
    return Catalogue(signatures, xid_rules, xid_default, healthy)


def _parse_signature(entry: dict[str, Any], where: str) -> Signature:
    sig_id = entry.get("id")
    if isinstance(sig_id, str):
        where = f"{where} ({sig_id})"
    _check_keys(entry, _SIGNATURE_KEYS, _REQUIRED_SIGNATURE_KEYS, where)
    if not isinstance(sig_id, str) or not _ID_SHAPE.match(sig_id):
        raise ConfigError(f"{where}: id must be dotted lowercase like 'nccl.watchdog_timeout'")
    patterns = tuple(_str_list(entry, "patterns", where))
    keywords = tuple(_str_list(entry, "keywords", where))
    examples = tuple(_str_list(entry, "examples", where))
    if not patterns or not keywords or not examples:
        raise ConfigError(f"{where}: patterns, keywords and examples must be non-empty")
    for pattern in patterns:
        _check_pattern(pattern, where)
    for keyword in keywords:
        # The matcher compares keywords with digits deleted (see matcher.py): keep some text.
        if not keyword.strip("0123456789 "):
            raise ConfigError(f"{where}: keyword {keyword!r} needs a character other than digits")
    strong = entry["strong"]
    description = entry["description"]
    if not isinstance(strong, bool) or not isinstance(description, str):
        raise ConfigError(f"{where}: strong must be a boolean and description a string")
    return Signature(
        id=sig_id,
        patterns=patterns,
        category=_enum(Category, entry, "category", where),
        kind=_enum(Kind, entry, "kind", where),
        role=_enum(Role, entry, "role", where),
        action_hint=_enum(ActionHint, entry, "action_hint", where),
        strong=strong,
        keywords=keywords,
        examples=examples,
        counter_examples=tuple(_str_list(entry, "counter_examples", where, required=False)),
        description=description,
    )


def _parse_xid(entry: dict[str, Any], where: str, *, with_codes: bool) -> XidRule:
    keys = _XID_KEYS if with_codes else _XID_KEYS - {"codes"}
    _check_keys(entry, keys, keys, where)
    codes: tuple[int, ...] = ()
    if with_codes:
        raw = entry["codes"]
        if not isinstance(raw, list) or not raw or not all(type(c) is int for c in raw):
            raise ConfigError(f"{where}: codes must be a non-empty list of integers")
        codes = tuple(raw)
    name, strong = entry["name"], entry["strong"]
    if not isinstance(name, str) or not isinstance(strong, bool):
        raise ConfigError(f"{where}: name must be a string and strong a boolean")
    return XidRule(
        codes=codes,
        name=name,
        category=_enum(Category, entry, "category", where),
        kind=_enum(Kind, entry, "kind", where),
        role=_enum(Role, entry, "role", where),
        action_hint=_enum(ActionHint, entry, "action_hint", where),
        strong=strong,
    )


def _check_pattern(pattern: str, where: str) -> None:
    try:
        compiled = re.compile(pattern)
    except re.error as exc:
        raise ConfigError(f"{where}: pattern {pattern!r} does not compile: {exc}") from exc
    unknown = set(compiled.groupindex) - ALLOWED_GROUPS
    if unknown:
        raise ConfigError(
            f"{where}: unknown capture group(s) {sorted(unknown)};"
            f" allowed: {sorted(ALLOWED_GROUPS)}"
        )


def _check_keys(
    entry: dict[str, Any], allowed: frozenset[str], required: frozenset[str], where: str
) -> None:
    unknown = set(entry) - allowed
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {sorted(unknown)}; valid: {sorted(allowed)}")
    missing = required - set(entry)
    if missing:
        raise ConfigError(f"{where}: missing key(s) {sorted(missing)}")


def _enum(enum: type[_E], entry: dict[str, Any], key: str, where: str) -> _E:
    value = entry[key]
    try:
        return enum(value)
    except ValueError:
        valid = ", ".join(member.value for member in enum)
        raise ConfigError(f"{where}: {key} {value!r} is not one of: {valid}") from None


def _str_list(data: dict[str, Any], key: str, where: str, *, required: bool = True) -> list[str]:
    value = data.get(key, None if required else [])
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ConfigError(f"{where}: {key} must be a list of strings")
    return value


def _parse_toml(text: str, origin: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{origin}: invalid TOML: {exc}") from exc


def _table_list(
    data: dict[str, Any], key: str, origin: str, *, required: bool = True
) -> list[dict[str, Any]]:
    value = data.get(key, None if required else [])
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        raise ConfigError(f"{origin}: {key} must be an array of tables ([[{key}]])")
    return value
