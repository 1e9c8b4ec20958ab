"""Context rules: the table in ``context_rules.toml`` and the code that applies it.

A root-cause line alone can mislead: ``No space left on device`` is a full disk on a checkpoint
write but a too-small ``/dev/shm`` inside NCCL setup; an illegal memory access is the
program's bug unless the kernel logged an Xid 13/31/43 for that GPU. Each rule names the line
it refines, the evidence that must surround it, and the category that evidence implies.
"""

from __future__ import annotations

import functools
import re
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

from trainmedic.core.errors import ConfigError
from trainmedic.core.model import Category, Event

_KEYS = frozenset(
    {
        "id",
        "text",
        "not_text",
        "signature",
        "category_in",
        "near",
        "with_event",
        "with_xid",
        "category",
        "confidence",
        "basis",
        "example",
        "example_event",
        "example_near",
    }
)
_REQUIRED = frozenset({"id", "category", "confidence", "basis", "example"})
_EVIDENCE = ("near", "with_event", "with_xid")


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


def _compile(rule_id: str, key: str, value: Any) -> re.Pattern[str]:
    if not isinstance(value, str):
        raise ConfigError(f"context rule {rule_id}: {key} must be a regex string")
    try:
        return re.compile(value)
    except re.error as exc:
        raise ConfigError(f"context rule {rule_id}: bad {key} regex: {exc}") from exc


def parse_rules(text: str, origin: str = "context_rules.toml") -> tuple[ContextRule, ...]:
    """Parse and validate the table; unknown keys fail fast and list the valid ones."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{origin}: {exc}") from exc
    rules: list[ContextRule] = []
    seen: set[str] = set()
    for raw in data.get("rule", []):
        rule_id = str(raw.get("id", "?"))
        unknown = set(raw) - _KEYS
        if unknown:
            raise ConfigError(
                f"{origin}: rule {rule_id}: unknown keys {sorted(unknown)}; valid: {sorted(_KEYS)}"
            )
        missing = _REQUIRED - set(raw)
        if missing or not any(k in raw for k in _EVIDENCE):
            raise ConfigError(f"{origin}: rule {rule_id}: missing {sorted(missing) or 'evidence'}")
        if rule_id in seen:
            raise ConfigError(f"{origin}: duplicate rule id {rule_id}")
        seen.add(rule_id)
        try:
            category = Category(raw["category"])
            category_in = (
                frozenset(Category(c) for c in raw["category_in"]) if "category_in" in raw else None
            )
        except ValueError as exc:
            raise ConfigError(f"{origin}: rule {rule_id}: {exc}") from exc
        confidence = float(raw["confidence"])
        if not 0.0 <= confidence <= 1.0:
            raise ConfigError(f"{origin}: rule {rule_id}: confidence outside [0, 1]")
        patterns = {
            k: _compile(rule_id, k, raw[k])
            for k in ("text", "not_text", "signature", "near", "with_event")
            if k in raw
        }
        rules.append(
            ContextRule(
                id=rule_id,
                category=category,
                confidence=confidence,
                basis=str(raw["basis"]),
                category_in=category_in,
                with_xid=frozenset(int(x) for x in raw.get("with_xid", [])),
                example=str(raw["example"]),
                example_event=str(raw.get("example_event", "")),
                example_near=str(raw.get("example_near", "")),
                **patterns,
            )
        )
    return tuple(rules)


@functools.cache
def default_rules() -> tuple[ContextRule, ...]:
    text = resources.files("trainmedic.core.attribute").joinpath("context_rules.toml").read_text()
    return parse_rules(text)


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
