"""Pure parsers of Slurm 22.05 output, tested on output recorded from the real lab cluster
(tests/data/slurm/): ``squeue --json -t all``, ``sinfo --json``, ``scontrol -o show job|node``.

Any output that is not what Slurm prints raises SchedulerError, which the adapter turns into
a stale snapshot: garbled data is "unknown", never a failure.
"""

from __future__ import annotations

import json
import os.path
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from trainmedic.core.badinput import BAD_INPUT, MAX_INT_DIGITS, BadInput
from trainmedic.core.errors import SchedulerError
from trainmedic.core.states import JobState, NodeState
from trainmedic.schedulers.base import JobInfo, NodeInfo
from trainmedic.schedulers.slurm.hostlist import HostlistError, expand_hostlist, validate_node_name

_JOB_STATES: dict[str, JobState] = {s.value: s for s in JobState}
# Slurm states without a JobState of their own (newer releases print some as flags).
_JOB_STATE_ALIASES: dict[str, JobState] = {
    "REQUEUE_HOLD": JobState.PENDING,
    "REQUEUE_FED": JobState.PENDING,
    "SPECIAL_EXIT": JobState.PENDING,
    "RESV_DEL_HOLD": JobState.PENDING,
    "CONFIGURING": JobState.RUNNING,
    "RESIZING": JobState.RUNNING,
    "SIGNALING": JobState.RUNNING,
    "STAGE_OUT": JobState.COMPLETING,
    "STOPPED": JobState.SUSPENDED,
}
_HELD_STATES = frozenset({"REQUEUE_HOLD", "SPECIAL_EXIT", "RESV_DEL_HOLD"})
HELD_REASONS = frozenset({"JobHeldUser", "JobHeldAdmin"})
_NODE_BASE: dict[str, NodeState] = {
    "IDLE": NodeState.IDLE,
    "ALLOCATED": NodeState.ALLOCATED,
    "ALLOC": NodeState.ALLOCATED,
    "MIXED": NodeState.MIXED,
    "DOWN": NodeState.DOWN,
    "FAIL": NodeState.FAIL,
}


def job_state(name: str) -> JobState:
    name = name.upper()
    return _JOB_STATES.get(name) or _JOB_STATE_ALIASES.get(name, JobState.UNKNOWN)


# Exceptions a malformed record can raise inside a parser; one record's is caught, counted
# and the record skipped, so the rest of the answer is still used.
RECORD_ERRORS = (
    SchedulerError,
    KeyError,
    TypeError,
    ValueError,
    AttributeError,
    OverflowError,
    RecursionError,
)


def _json_int(literal: str) -> int | str:
    """``json``'s integer hook: a literal too long for an id or count stays a string (the
    record using it is then refused as malformed), instead of ``int()`` raising on 4300+
    digits and losing the whole answer."""
    if len(literal.lstrip("-")) > MAX_INT_DIGITS:
        return literal
    return int(literal)


def load_json_object(text: str | bytes, what: str) -> dict[str, Any]:
    try:
        doc = json.loads(text, parse_int=_json_int)
    except (ValueError, RecursionError) as err:
        BAD_INPUT.count(BadInput.SLURM_OUTPUT)
        raise SchedulerError(f"{what}: output is not JSON ({str(err)[:200]})") from None
    if not isinstance(doc, dict):
        raise SchedulerError(f"{what}: expected a JSON object, got {type(doc).__name__}")
    errors = doc.get("errors")
    if errors:
        raise SchedulerError(f"{what}: Slurm reported errors: {json.dumps(errors)[:300]}")
    return doc


def decode_exit_code(raw: object) -> int | None:
    """22.05 gives the wait status (768 = exit 3, 15 = killed by SIGTERM -> 143); newer
    releases a dict with ``return_code`` / ``signal``."""
    if isinstance(raw, bool) or raw is None:
        return None
    if isinstance(raw, int):
        sig = raw & 0x7F
        return 128 + sig if sig else (raw >> 8) & 0xFF
    if isinstance(raw, dict):
        sig = raw.get("signal", {}).get("id", {})
        if isinstance(sig, dict) and sig.get("set") and sig.get("number"):
            return 128 + int(sig["number"])
        code = raw.get("return_code", {})
        if isinstance(code, dict) and code.get("set"):
            return int(code.get("number", 0))
    return None


def _number(raw: object) -> int:
    """22.05 prints plain integers; newer releases ``{"set": true, "number": N}``."""
    if isinstance(raw, bool):
        return int(raw)
    if isinstance(raw, int):
        return raw
    if isinstance(raw, dict) and raw.get("set"):
        return int(raw.get("number", 0))
    return 0


def _is_count(value: object) -> bool:
    """A non-negative JSON integer (not a bool, not an over-long literal kept as text)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


_OUTPUT_TOKEN = re.compile(r"%([jJxuAaN%])")


def expand_output_path(pattern: str, job: Mapping[str, Any], job_id: str) -> str:
    """The file a job writes (``%j``, ``%x``, ``%u``, ``%A``, ``%a``, ``%N``, ``%%``), relative
    to its working directory; Slurm's default ``slurm-%j.out`` when none was given."""
    array_task = job.get("array_task_id")
    if not pattern:
        pattern = "slurm-%A_%a.out" if array_task is not None else "slurm-%j.out"
    if "%" in pattern:
        numeric = str(job.get("job_id", job_id))
        subs = {
            "j": numeric,
            "J": numeric,
            "x": str(job.get("name", "")),
            "u": str(job.get("user_name", "")),
            "A": str(job.get("array_job_id") or numeric),
            "a": str(array_task if array_task is not None else 4294967294),
            "N": str(job.get("batch_host", "")),
            "%": "%",
        }
        pattern = _OUTPUT_TOKEN.sub(lambda m: subs[m.group(1)], pattern)
    cwd = str(job.get("current_working_directory", ""))
    return os.path.join(cwd, pattern) if cwd and not pattern.startswith("/") else pattern


def job_from_squeue(job: Mapping[str, Any]) -> JobInfo:
    """One element of ``squeue --json``'s ``jobs`` as a JobInfo."""
    try:
        numeric = job["job_id"]
        raw_state = job["job_state"]
    except (KeyError, TypeError):
        raise SchedulerError(f"squeue --json: job without job_id/job_state: {job!r:.200}") from None
    if not _is_count(numeric):
        raise SchedulerError(f"squeue --json: job_id is not a job number: {numeric!r:.40}")
    flags: list[str] = []
    if isinstance(raw_state, list):  # 23.02+: ["PENDING", "REQUEUED"]
        flags = [str(s).upper() for s in raw_state[1:]]
        raw_state = raw_state[0] if raw_state else "UNKNOWN"
    state_name = str(raw_state).upper()
    state = job_state(state_name)
    array_task = job.get("array_task_id")
    array_job = job.get("array_job_id") or 0
    if isinstance(array_task, dict):
        array_task = array_task.get("number") if array_task.get("set") else None
    if array_task is not None and not _is_count(array_task):
        raise SchedulerError(f"squeue --json: job {numeric}: bad array_task_id {array_task!r:.40}")
    job_id = f"{_number(array_job)}_{array_task}" if array_task is not None else str(numeric)
    reason = str(job.get("state_reason") or "")
    reason = "" if reason == "None" else reason
    priority = _number(job.get("priority", 1))
    held = (state is JobState.PENDING) and (
        reason in HELD_REASONS
        or priority == 0
        or state_name in _HELD_STATES
        or bool(_HELD_STATES.intersection(flags))
    )
    stdout = expand_output_path(str(job.get("standard_output") or ""), job, job_id)
    stderr_pattern = str(job.get("standard_error") or "")
    stderr = expand_output_path(stderr_pattern, job, job_id) if stderr_pattern else stdout
    try:
        nodes = expand_hostlist(str(job.get("nodes") or ""))
        excluded = expand_hostlist(str(job.get("excluded_nodes") or ""))
    except HostlistError as err:
        raise SchedulerError(f"squeue --json: job {job_id}: {err}") from None
    return JobInfo(
        job_id=job_id,
        state=state,
        name=str(job.get("name") or ""),
        nodes=nodes,
        attempt=_number(job.get("restart_cnt", 0)),
        excluded_nodes=excluded,
        held=held,
        reason=reason,
        exit_code=decode_exit_code(job.get("exit_code")) if state.is_terminal() else None,
        stdout_path=stdout,
        stderr_path=stderr,
        comment=str(job.get("comment") or ""),
        partition=str(job.get("partition") or ""),
        user=str(job.get("user_name") or ""),
    )


def parse_squeue_json(text: str | bytes) -> tuple[JobInfo, ...]:
    """``squeue --json -t all`` -> one JobInfo per job (array tasks as ``123_4``).

    A job record that does not parse is skipped (and counted as ``slurm_job`` bad input):
    one user's odd job never hides every other job from the service."""
    jobs = load_json_object(text, "squeue --json").get("jobs")
    if not isinstance(jobs, list):
        raise SchedulerError("squeue --json: no 'jobs' list in output")
    parsed: list[JobInfo] = []
    for raw in jobs:
        try:
            parsed.append(job_from_squeue(raw))
        except RECORD_ERRORS:
            BAD_INPUT.count(BadInput.SLURM_JOB)
    return tuple(parsed)


@dataclass(frozen=True, slots=True)
class SlurmNode:
    """A node as sinfo shows it, with what NodeInfo leaves out (partitions, CPUs)."""

    info: NodeInfo
    partitions: tuple[str, ...] = ()
    cpus: int = 0


_NodeKey = tuple[str, tuple[str, ...]]
_node_state_cache: dict[_NodeKey, tuple[NodeState, bool]] = {}


def classify_node_state(state: object, state_flags: object) -> tuple[NodeState, bool]:
    """(NodeState, drain) from sinfo's ``state`` (a string in 22.05, a list later) and
    ``state_flags``. Precedence: what makes a node unusable wins over what it is doing.
    Memoised: ten thousand nodes share a handful of state combinations."""
    if isinstance(state, list):  # 23.02+: ["IDLE", "DRAIN"]
        base_raw, extra = (str(state[0]) if state else "UNKNOWN"), tuple(map(str, state[1:]))
    else:
        base_raw, extra = str(state), ()
    flag_list = state_flags if isinstance(state_flags, list) else ()
    key = (base_raw, extra + tuple(map(str, flag_list)))
    cached = _node_state_cache.get(key)
    if cached is not None:
        return cached
    base = base_raw.upper()
    flags = {f.upper() for f in key[1]}
    if base == "DOWN":
        node_state = NodeState.DOWN
    elif "FAIL" in flags or base == "FAIL":
        node_state = NodeState.FAIL
    elif "NOT_RESPONDING" in flags:
        node_state = NodeState.NOT_RESPONDING
    else:
        node_state = _NODE_BASE.get(base, NodeState.UNKNOWN)
    result = (node_state, "DRAIN" in flags or base in ("DRAINED", "DRAINING", "DRAIN"))
    if len(_node_state_cache) < 1024:
        _node_state_cache[key] = result
    return result


def _node_info(node: Mapping[str, Any]) -> NodeInfo:
    try:
        name = node["name"]
        raw_state = node["state"]
    except (KeyError, TypeError):
        raise SchedulerError(f"sinfo --json: node without name/state: {node!r:.200}") from None
    state, drain = classify_node_state(raw_state, node.get("state_flags"))
    if not isinstance(name, str):
        raise SchedulerError(f"sinfo --json: node name is not a string: {name!r:.60}")
    return NodeInfo(validate_node_name(name), state, drain, str(node.get("reason") or ""))


def node_from_sinfo(node: Mapping[str, Any]) -> SlurmNode:
    return SlurmNode(
        info=_node_info(node),
        partitions=tuple(str(p) for p in node.get("partitions") or ()),
        cpus=_number(node.get("cpus", 0)),
    )


def _sinfo_nodes(text: str | bytes) -> list[Any]:
    nodes = load_json_object(text, "sinfo --json").get("nodes")
    if not isinstance(nodes, list):
        raise SchedulerError("sinfo --json: no 'nodes' list in output")
    return nodes


def parse_sinfo_nodes(text: str | bytes) -> tuple[SlurmNode, ...]:
    """``sinfo --json`` with partitions and CPUs (what requeue planning needs)."""
    seen: dict[str, SlurmNode] = {}
    for raw in _sinfo_nodes(text):
        try:
            node = node_from_sinfo(raw)
        except RECORD_ERRORS:
            BAD_INPUT.count(BadInput.SLURM_NODE)
            continue
        seen.setdefault(node.info.name, node)
    return tuple(seen.values())


def parse_sinfo_json(text: str | bytes) -> tuple[NodeInfo, ...]:
    """``sinfo --json`` -> one NodeInfo per node (DOWN / FAIL / NOT_RESPONDING, drain flag)."""
    seen: dict[str, NodeInfo] = {}
    for raw in _sinfo_nodes(text):
        try:
            info = _node_info(raw)
        except RECORD_ERRORS:
            BAD_INPUT.count(BadInput.SLURM_NODE)
            continue
        if info.name not in seen:
            seen[info.name] = info
    return tuple(seen.values())
