"""Fault specifications for the example trainer: parsing and validation (no side effects).

Faults come from ``<run_dir>/faults.json`` (re-read whenever its mtime changes) and/or the
environment variable ``TRAINMEDIC_FAULTS``; both hold the same JSON: a list of objects, or
``{"faults": [...]}``. One fault:

    {"id": "f1", "type": "xid79", "node": "node2", "rank": 1, "at_iter": 150,
     "persistent": false, "slow_s": 0.2, "duration_iters": 50, "error": "key"}

Only ``id`` and ``type`` are required. ``node``/``rank`` restrict which ranks fire (none:
every rank is eligible). Without ``at_iter`` the fault fires at the next iteration ("now").
A one-shot fault (``persistent`` false, the default) fires once across all restarts: the rank
that fires claims it first by creating ``<run_dir>/faults.fired/<id>`` with O_EXCL. A
persistent fault fires in every attempt (at exactly ``at_iter``, or at the first iteration
of each attempt without it). ``app_error`` is persistent by nature.

| type        | what the rank does                                                        |
|-------------|---------------------------------------------------------------------------|
| exit        | logs a RuntimeError line, then exits 1                                    |
| exception   | raises a real RuntimeError (matmul shape mismatch) with its traceback     |
| sigkill     | kills itself with SIGKILL, printing nothing                               |
| hang        | sleeps forever before the gradient allreduce                              |
| slow        | sleeps ``slow_s`` more per step in compute, for ``duration_iters`` or on  |
| nan         | its loss becomes NaN (all ranks then stop: ``loss is nan at iter=N``)     |
| app_error   | KeyError ``'decoder.layers.12.weight'`` (error=key) or a ValueError in    |
|             | data decoding (error=value), every attempt, at ``at_iter``                |
| xid79       | appends an Xid 79 line to the node's kernel log, then SIGKILL             |
| xid48       | appends Xid 48 + uncorrectable ECC lines, raises a CUDA-style RuntimeError |
| ib_port     | appends mlx5 port-module / IB port error lines, dies with a NCCL-style    |
|             | network error                                                             |
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from enum import StrEnum
from typing import Any


class FaultType(StrEnum):
    EXIT = "exit"
    EXCEPTION = "exception"
    SIGKILL = "sigkill"
    HANG = "hang"
    SLOW = "slow"
    NAN = "nan"
    APP_ERROR = "app_error"
    XID79 = "xid79"
    XID48 = "xid48"
    IB_PORT = "ib_port"


# Types that write a kernel-style line to the node's kernel log before the rank dies.
HARDWARE_FAULTS = frozenset({FaultType.XID79, FaultType.XID48, FaultType.IB_PORT})
APP_ERROR_VARIANTS = ("key", "value")


@dataclass(frozen=True, slots=True)
class Fault:
    id: str
    type: FaultType
    node: str | None = None
    rank: int | None = None
    at_iter: int | None = None
    persistent: bool = False
    slow_s: float = 0.2
    duration_iters: int | None = None
    error: str = "key"

    @property
    def one_shot(self) -> bool:
        """Fires once across restarts (claimed in faults.fired/)."""
        return not self.persistent and self.type is not FaultType.APP_ERROR

    def matches(self, node: str, rank: int) -> bool:
        return (self.node is None or self.node == node) and (self.rank is None or self.rank == rank)


_FIELD_NAMES = tuple(f.name for f in fields(Fault))


def _typed(obj: dict[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    value = obj.get(key)
    if value is None:
        return None
    # bool is an int subclass: "rank": true must not pass as rank 1.
    if isinstance(value, bool) and kind is not bool:
        raise ValueError(f"{where}: {key!r} must be {kind}, got {value!r}")
    if not isinstance(value, kind):
        raise ValueError(f"{where}: {key!r} must be {kind}, got {value!r}")
    return value


def parse_fault(obj: object, where: str = "fault") -> Fault:
    """One fault from its JSON object; ValueError names the bad field and the valid ones."""
    if not isinstance(obj, dict):
        raise ValueError(f"{where}: expected an object, got {type(obj).__name__}")
    unknown = sorted(set(obj) - set(_FIELD_NAMES))
    if unknown:
        raise ValueError(f"{where}: unknown keys {unknown}; valid keys: {list(_FIELD_NAMES)}")
    fault_id = _typed(obj, "id", str, where)
    if not fault_id or "/" in fault_id or fault_id.startswith("."):
        raise ValueError(f"{where}: 'id' must be a non-empty name without '/', got {fault_id!r}")
    try:
        fault_type = FaultType(str(obj.get("type")))
    except ValueError:
        valid = [t.value for t in FaultType]
        raise ValueError(f"{where}: unknown type {obj.get('type')!r}; valid: {valid}") from None
    error = _typed(obj, "error", str, where) or "key"
    if error not in APP_ERROR_VARIANTS:
        raise ValueError(f"{where}: 'error' must be one of {APP_ERROR_VARIANTS}, got {error!r}")
    slow_s = _typed(obj, "slow_s", (int, float), where)
    return Fault(
        id=fault_id,
        type=fault_type,
        node=_typed(obj, "node", str, where),
        rank=_typed(obj, "rank", int, where),
        at_iter=_typed(obj, "at_iter", int, where),
        persistent=bool(_typed(obj, "persistent", bool, where)),
        slow_s=0.2 if slow_s is None else float(slow_s),
        duration_iters=_typed(obj, "duration_iters", int, where),
        error=error,
    )


def parse_faults(text: str, origin: str = "faults") -> tuple[Fault, ...]:
    """All faults in a JSON text (a list, or ``{"faults": [...]}``; empty text: none)."""
    if not text.strip():
        return ()
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{origin}: invalid JSON: {exc}") from None
    if isinstance(data, dict) and set(data) == {"faults"}:
        data = data["faults"]
    if not isinstance(data, list):
        raise ValueError(f'{origin}: expected a list of faults or {{"faults": [...]}}')
    faults = tuple(parse_fault(item, f"{origin}[{i}]") for i, item in enumerate(data))
    ids = [f.id for f in faults]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise ValueError(f"{origin}: duplicate fault ids {duplicates}")
    return faults
