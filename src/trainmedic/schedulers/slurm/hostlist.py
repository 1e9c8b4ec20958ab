"""Slurm hostlist expressions (``node[1-3,5]``, ``gpu[01-16]``, ``a1,b[2-3]``) as pure functions.

Every node name that reaches a Slurm command passes ``validate_node_name`` first: a name is a
plain hostname, so it can never smuggle an option or a second field into an argument list.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from trainmedic.core.badinput import BAD_INPUT, BadInput
from trainmedic.core.errors import SchedulerError

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_RANGE = re.compile(r"(\d{1,9})(?:-(\d{1,9}))?")
MAX_HOSTS = 65_536
"""Names one expression may expand to (Slurm's own hostlist limit; more nodes than any
cluster has): ``a[0-99999]b[0-99999]`` is refused before it is expanded, not after."""
MAX_EXPRESSION_CHARS = 1 << 20
"""Characters of one expression: a longer one is refused without being parsed."""


class HostlistError(SchedulerError, ValueError):
    """A hostlist expression or node name that does not follow Slurm's grammar."""


def validate_node_name(name: str) -> str:
    """Return ``name`` if it is a single plain node name; HostlistError otherwise."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        shown = _short(name) if isinstance(name, str) else type(name).__name__
        raise HostlistError(f"invalid node name {shown}: expected letters, digits, '.', '_', '-'")
    return name


def _split_top_level(expr: str) -> list[str]:
    """Split at commas outside brackets."""
    parts: list[str] = []
    depth = 0
    start = 0
    for i, ch in enumerate(expr):
        if ch == "[":
            depth += 1
            if depth > 1:
                raise HostlistError(f"invalid hostlist {_short(expr)}: nested '['")
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise HostlistError(f"invalid hostlist {_short(expr)}: unbalanced ']'")
        elif ch == "," and depth == 0:
            parts.append(expr[start:i])
            start = i + 1
    if depth != 0:
        raise HostlistError(f"invalid hostlist {_short(expr)}: unbalanced '['")
    parts.append(expr[start:])
    return parts


def _short(expr: str) -> str:
    return repr(expr) if len(expr) <= 80 else repr(expr[:77] + "...")


def _range_bounds(body: str, expr: str) -> list[tuple[str, str | None]]:
    """The items of one bracket, checked, before anything is expanded."""
    items: list[tuple[str, str | None]] = []
    for item in body.split(","):
        m = _RANGE.fullmatch(item)
        if not m:
            raise HostlistError(f"invalid hostlist {_short(expr)}: bad range {item[:40]!r}")
        lo, hi = m.group(1), m.group(2)
        if hi is not None and int(hi) < int(lo):
            raise HostlistError(f"invalid hostlist {_short(expr)}: descending range {item!r}")
        items.append((lo, hi))
    return items


def _range_size(items: list[tuple[str, str | None]]) -> int:
    return sum(1 if hi is None else int(hi) - int(lo) + 1 for lo, hi in items)


def _expand_ranges(items: list[tuple[str, str | None]]) -> list[str]:
    values: list[str] = []
    for lo, hi in items:
        if hi is None:
            values.append(lo)
            continue
        width = len(lo) if lo.startswith("0") and len(lo) > 1 else 0
        values.extend(str(n).zfill(width) for n in range(int(lo), int(hi) + 1))
    return values


def _expand_one(part: str, expr: str, budget: int) -> list[str]:
    """The names of one top-level part; HostlistError when they would exceed ``budget``."""
    if "[" not in part:
        return [validate_node_name(part)] if part else []
    pieces: list[tuple[str, list[tuple[str, str | None]]]] = []
    rest = part
    size = 1
    while "[" in rest:
        open_at = rest.find("[")
        close_at = rest.find("]", open_at)
        items = _range_bounds(rest[open_at + 1 : close_at], expr)
        size *= _range_size(items)  # the product of the brackets, computed before expanding
        if size > budget:
            BAD_INPUT.count(BadInput.HOSTLIST)
            raise HostlistError(f"invalid hostlist {_short(expr)}: more than {MAX_HOSTS} names")
        pieces.append((rest[:open_at], items))
        rest = rest[close_at + 1 :]
    names = [""]
    for prefix, items in pieces:
        names = [n + prefix + v for n in names for v in _expand_ranges(items)]
    names = [n + rest for n in names]
    for name in names:
        try:
            validate_node_name(name)
        except HostlistError:
            raise HostlistError(f"invalid hostlist {_short(expr)}: bad name {name!r}") from None
    return names


def expand_hostlist(expr: str) -> tuple[str, ...]:
    """``"node[1-3,5],gpu07"`` -> ``("node1", "node2", "node3", "node5", "gpu07")``.

    Zero padding is kept (``n[01-03]`` -> ``n01 n02 n03``); duplicates keep their first place.
    Empty, ``(null)`` and ``None`` mean no nodes.
    """
    expr = expr.strip()
    if expr in ("", "(null)", "None"):
        return ()
    if len(expr) > MAX_EXPRESSION_CHARS:
        BAD_INPUT.count(BadInput.HOSTLIST)
        raise HostlistError(f"invalid hostlist {_short(expr)}: over {MAX_EXPRESSION_CHARS} chars")
    if "[" not in expr:
        # The common case (one node or a plain list): no bracket parsing.
        names = [validate_node_name(p) for p in expr.split(",") if p]
    else:
        names = []
        for part in _split_top_level(expr):
            names.extend(_expand_one(part, expr, MAX_HOSTS - len(names)))
    if len(names) > MAX_HOSTS:
        BAD_INPUT.count(BadInput.HOSTLIST)
        raise HostlistError(f"invalid hostlist {_short(expr)}: more than {MAX_HOSTS} names")
    return tuple(dict.fromkeys(names))


def join_hostlist(names: Iterable[str]) -> str:
    """A comma-separated list Slurm accepts (validated, de-duplicated, sorted)."""
    return ",".join(sorted({validate_node_name(n) for n in names}))
