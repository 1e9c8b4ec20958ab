"""Context rules: the table in ``context_rules*.toml`` and the code that applies it.

A root-cause line alone can mislead: ``No space left on device`` is a full disk on a checkpoint
write but a too-small ``/dev/shm`` inside NCCL setup; an illegal memory access is the
program's bug unless the kernel logged an Xid 13/31/43 for that GPU. Each rule names the line
it refines, the evidence that must surround it, and the category that evidence implies.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources

from trainmedic.core.errors import ConfigError
from trainmedic.core.model import Category, Event
from trainmedic.core.tomlschema import build, parse_toml

_EVIDENCE = ("near", "with_event", "with_xid")
_REGEX_KEYS = ("text", "not_text", "signature", "near", "with_event")


@dataclass(frozen=True, slots=True)
class _RuleEntry:
    """One ``[[rule]]`` table as written (see ``tomlschema``); regexes still text."""

    id: str
    category: Category
    confidence: float
    basis: str
    example: str
    text: str | None = None
    not_text: str | None = None
    signature: str | None = None
    category_in: frozenset[Category] | None = None
    near: str | None = None
    with_event: str | None = None
    with_xid: frozenset[int] = frozenset()
    example_event: str = ""
    example_near: str = ""


@dataclass(frozen=True, slots=True)
class _RulesFile:
    rule: tuple[_RuleEntry, ...] = ()


@dataclass(frozen=True, slots=True)
class ContextRule:
    id: str
    category: Category
    confidence: float
    basis: str
    text: re.Pattern[str] | None = None
    not_text: re.Pattern[str] | None = None
    signature: re.Pattern[str] | None = None
    category_in: frozenset[Category] | None = None
    near: re.Pattern[str] | None = None
    with_event: re.Pattern[str] | None = None
    with_xid: frozenset[int] = frozenset()
    example: str = ""
    example_event: str = ""
    example_near: str = ""

    def fits(self, event: Event) -> bool:
        """Whether the rule is about this kind of line (before looking at evidence)."""
        if self.text is not None and not self.text.search(event.text):
            return False
        if self.not_text is not None and self.not_text.search(event.text):
            return False
        if self.signature is not None and not self.signature.search(event.signature):
            return False
        return self.category_in is None or event.category in self.category_in

    def supported(self, event: Event, others: Sequence[Event], near_text: str) -> bool:
        return self.support(event, others, near_text) is not None

    def support(self, event: Event, others: Sequence[Event], near_text: str) -> str | None:
        """What supports the rule for ``event`` (a short description), or ``None``."""
        if self.near is not None:
            m = self.near.search(near_text)
            if m:
                return f"nearby: {m.group(0)!r}"
        for other in others:
            if other is event or (other.node and event.node and other.node != event.node):
                continue
            if (self.with_xid and other.xid in self.with_xid) or (
                self.with_event is not None
                and (self.with_event.search(other.text) or self.with_event.search(other.signature))
            ):
                where = f"{other.source}:{other.line}" if other.source else f"line {other.line}"
                return f"{other.signature} at {where}"
        return None


def _compile(origin: str, rule_id: str, key: str, value: str) -> re.Pattern[str]:
    try:
        return re.compile(value)
    except re.error as exc:
        raise ConfigError(f"{origin}: rule {rule_id}: bad {key} regex: {exc}") from exc


def parse_rules(text: str, origin: str = "context_rules.toml") -> tuple[ContextRule, ...]:
    """Parse and validate the table; unknown keys fail fast and list the valid ones."""
    entries = build(_RulesFile, parse_toml(text, origin), origin).rule
    rules: list[ContextRule] = []
    seen: set[str] = set()
    for raw in entries:
        if not any(getattr(raw, k) for k in _EVIDENCE):
            raise ConfigError(f"{origin}: rule {raw.id}: missing evidence ({', '.join(_EVIDENCE)})")
        if raw.id in seen:
            raise ConfigError(f"{origin}: duplicate rule id {raw.id}")
        seen.add(raw.id)
        if not 0.0 <= raw.confidence <= 1.0:
            raise ConfigError(f"{origin}: rule {raw.id}: confidence outside [0, 1]")
        patterns = {
            k: _compile(origin, raw.id, k, getattr(raw, k))
            for k in _REGEX_KEYS
            if getattr(raw, k) is not None
        }
        rules.append(
            ContextRule(
                id=raw.id,
                category=raw.category,
                confidence=raw.confidence,
                basis=raw.basis,
                category_in=raw.category_in,
                with_xid=raw.with_xid,
                example=raw.example,
                example_event=raw.example_event,
                example_near=raw.example_near,
                **patterns,
            )
        )
    return tuple(rules)


# The table's parts, in order (the first matching rule wins): the main table, then parts split
# off by area so that no file grows past a few hundred lines.
RULE_FILES = (
    "context_rules.toml",
    "context_rules_fabric.toml",
    "context_rules_stack.toml",
    "context_rules_rl.toml",
)


@functools.cache
def default_rules() -> tuple[ContextRule, ...]:
    folder = resources.files("trainmedic.core.attribute")
    rules = tuple(
        rule for name in RULE_FILES for rule in parse_rules(folder.joinpath(name).read_text(), name)
    )
    ids = [r.id for r in rules]
    if len(set(ids)) != len(ids):
        raise ConfigError(f"context rules: an id is used twice across {', '.join(RULE_FILES)}")
    return rules


def refine(
    root: Event,
    others: Sequence[Event],
    near_text: str,
    rules: Sequence[ContextRule] | None = None,
) -> ContextRule | None:
    """The first rule that applies to ``root`` given its surroundings, if any."""
    found = refine_with_support(root, others, near_text, rules)
    return found[0] if found else None


def refine_with_support(
    root: Event,
    others: Sequence[Event],
    near_text: str,
    rules: Sequence[ContextRule] | None = None,
) -> tuple[ContextRule, str] | None:
    """The first applicable rule and what supports it."""
    for rule in default_rules() if rules is None else rules:
        if rule.fits(root):
            support = rule.support(root, others, near_text)
            if support is not None:
                return rule, support
    return None
