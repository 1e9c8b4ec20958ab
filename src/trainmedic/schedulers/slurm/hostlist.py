"""Slurm hostlist expressions (``node[1-3,5]``, ``gpu[01-16]``, ``a1,b[2-3]``) as pure functions.

Every node name that reaches a Slurm command passes ``validate_node_name`` first: a name is a
plain hostname, so it can never smuggle an option or a second field into an argument list.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from trainmedic.core.errors import SchedulerError

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_RANGE = re.compile(r"(\d+)(?:-(\d+))?")
_MAX_EXPANSION = 1_000_000


class HostlistError(SchedulerError, ValueError):
    """A hostlist expression or node name that does not follow Slurm's grammar."""


def validate_node_name(name: str) -> str:
    """Return ``name`` if it is a single plain node name; HostlistError otherwise."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise HostlistError(f"invalid node name {name!r}: expected letters, digits, '.', '_', '-'")
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
                raise HostlistError(f"invalid hostlist {expr!r}: nested '['")
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise HostlistError(f"invalid hostlist {expr!r}: unbalanced ']'")
        elif ch == "," and depth == 0:
            parts.append(expr[start:i])
            start = i + 1
    if depth != 0:
        raise HostlistError(f"invalid hostlist {expr!r}: unbalanced '['")
    parts.append(expr[start:])
    return parts


def _expand_ranges(body: str, expr: str) -> list[str]:
    values: list[str] = []
    for item in body.split(","):
        m = _RANGE.fullmatch(item)
        if not m:
            raise HostlistError(f"invalid hostlist {expr!r}: bad range {item!r}")
        lo, hi = m.group(1), m.group(2)
        if hi is None:
            values.append(lo)
            continue
        if int(hi) < int(lo):
            raise HostlistError(f"invalid hostlist {expr!r}: descending range {item!r}")
        if int(hi) - int(lo) > _MAX_EXPANSION:
            raise HostlistError(f"invalid hostlist {expr!r}: range {item!r} too large")
        width = len(lo) if lo.startswith("0") and len(lo) > 1 else 0
        values.extend(str(n).zfill(width) for n in range(int(lo), int(hi) + 1))
    return values


def _expand_one(part: str, expr: str) -> list[str]:
    if "[" not in part:
        return [validate_node_name(part)] if part else []
    names = [""]
    rest = part
    while rest:
        open_at = rest.find("[")
        if open_at < 0:
            names = [n + rest for n in names]
            break
        close_at = rest.find("]", open_at)
        prefix, body = rest[:open_at], rest[open_at + 1 : close_at]
        names = [n + prefix + v for n in names for v in _expand_ranges(body, expr)]
        rest = rest[close_at + 1 :]
    for name in names:
        try:
            validate_node_name(name)
        except HostlistError:
            raise HostlistError(f"invalid hostlist {expr!r}: bad name {name!r}") from None
    return names


def expand_hostlist(expr: str) -> tuple[str, ...]:
    """``"node[1-3,5],gpu07"`` -> ``("node1", "node2", "node3", "node5", "gpu07")``.

    Zero padding is kept (``n[01-03]`` -> ``n01 n02 n03``); duplicates keep their first place.
    Empty, ``(null)`` and ``None`` mean no nodes.
    """
    expr = expr.strip()
    if expr in ("", "(null)", "None"):
        return ()
    if "[" not in expr:
        # The common case (one node or a plain list): no bracket parsing.
        names = [validate_node_name(p) for p in expr.split(",") if p]
    else:
        names = [n for part in _split_top_level(expr) for n in _expand_one(part, expr)]
    return tuple(dict.fromkeys(names))


def join_hostlist(names: Iterable[str]) -> str:
    """A comma-separated list Slurm accepts (validated, de-duplicated, sorted)."""
    return ",".join(sorted({validate_node_name(n) for n in names}))
