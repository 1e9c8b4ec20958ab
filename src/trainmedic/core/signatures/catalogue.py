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
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from trainmedic.core.errors import ConfigError
from trainmedic.core.model import ActionHint, Category, Kind, Role
from trainmedic.core.tomlschema import build, parse_toml

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

_INCLUDE_NAME = re.compile(r"^[\w.-]+\.toml$")
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
    description: str
    counter_examples: tuple[str, ...] = ()
    generic: bool = False
    """A bare exception type (``ValueError: <anything>``): the type says only that the program
    raised, the message says why. Python frameworks wrap NCCL, CUDA, disk and build failures in
    such types, so on a line where a mechanism signature also matches, the mechanism decides
    (``Hit.outranked``); alone, the bare type still does."""
    likely: bool = False
    """The category is what the message usually means, not what it proves: a CUDA call failing
    inside NCCL or cuDNN, a GPU page fault under ROCm, a native crash. Real threads about it
    mostly concluded ``category``, some something else, so as a root cause it stands at
    ``verdict_build.LIKELY_CONFIDENCE``: below the stop threshold (restart, never stop or drain on
    it alone); an earlier, more precise line still wins as it always does."""


@dataclass(frozen=True, slots=True)
class XidRule:
    """What one NVIDIA Xid number means for the node and the job (NVSentinel's buckets)."""

    name: str
    category: Category
    kind: Kind
    role: Role
    action_hint: ActionHint
    strong: bool
    codes: tuple[int, ...] = ()  # empty only in xid_default


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


@dataclass(frozen=True, slots=True)
class _CatalogueFile:
    """The main file's schema (see ``tomlschema``)."""

    xid: tuple[XidRule, ...]
    xid_default: XidRule
    signature: tuple[Signature, ...] = ()
    include: tuple[str, ...] = ()
    healthy_lines: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class _PartFile:
    """An included file's schema: signatures only."""

    signature: tuple[Signature, ...]


def parse_catalogue(
    text: str, origin: str, read_include: Callable[[str], str] | None = None
) -> Catalogue:
    """Parse catalogue TOML ``text``; ``origin`` names it in error messages. ``read_include``
    returns the text of a file named in ``include`` (which holds only [[signature]] tables)."""
    main = build(_CatalogueFile, parse_toml(text, origin), origin)
    signatures = list(main.signature)
    for name in main.include:
        if not _INCLUDE_NAME.match(name) or read_include is None:
            raise ConfigError(f"{origin}: cannot include {name!r} (a sibling *.toml file name)")
        signatures += build(_PartFile, parse_toml(read_include(name), name), name).signature
    seen: set[str] = set()
    for signature in signatures:
        _check_signature(signature, origin)
        if signature.id in seen:
            raise ConfigError(f"{origin}: duplicate signature id {signature.id!r}")
        seen.add(signature.id)
    for i, rule in enumerate(main.xid):
        if not rule.codes:
            raise ConfigError(f"{origin}: xid #{i + 1}: codes must be a non-empty list")
    if main.xid_default.codes:
        raise ConfigError(f"{origin}: xid_default: unknown key 'codes'")
    codes = [code for rule in main.xid for code in rule.codes]
    if len(codes) != len(set(codes)):
        raise ConfigError(f"{origin}: an Xid number appears in two xid rules")
    return Catalogue(tuple(signatures), main.xid, main.xid_default, main.healthy_lines)


def _check_signature(signature: Signature, origin: str) -> None:
    """What the schema cannot say: id shape, non-empty lists, regexes, keyword text."""
    where = f"{origin}: signature {signature.id!r}"
    if not _ID_SHAPE.match(signature.id):
        raise ConfigError(f"{where}: id must be dotted lowercase like 'nccl.watchdog_timeout'")
    if not signature.patterns or not signature.keywords or not signature.examples:
        raise ConfigError(f"{where}: patterns, keywords and examples must be non-empty")
    for pattern in signature.patterns:
        _check_pattern(pattern, where)
    for keyword in signature.keywords:
        # The matcher compares keywords with digits deleted (see matcher.py): keep some text.
        if not keyword.strip("0123456789 "):
            raise ConfigError(f"{where}: keyword {keyword!r} needs a character other than digits")


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
