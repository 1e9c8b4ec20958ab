"""Pure parsers of ``scontrol -o show job ID`` and ``scontrol -o show node NAME`` (22.05 has
no ``--json`` for scontrol). One record per line: ``Key=value`` pairs separated by spaces,
where some values (Comment, Command, OS, Reason ...) may contain spaces themselves."""

from __future__ import annotations

import re
from dataclasses import dataclass

from trainmedic.core.badinput import BAD_INPUT, BadInput, small_int
from trainmedic.core.errors import SchedulerError
from trainmedic.core.states import JobState, NodeState
from trainmedic.schedulers.slurm.hostlist import HostlistError, expand_hostlist
from trainmedic.schedulers.slurm.parse import HELD_REASONS, job_state

_KEY = re.compile(r"(?:^|(?<=\s))([A-Za-z][A-Za-z0-9_/:]*)=")
# The keys 22.05 prints, in the order it prints them (recorded in tests/data/slurm/; the
# optional ones where slurm_sprint_job_info puts them). Each key is printed once, and only
# in this order: that is what tells a real field from "Key=" text inside a user's value.
_JOB_ORDER_22_05 = """
    JobId ArrayJobId ArrayTaskId ArrayTaskThrottle JobName UserId GroupId MCS_label Priority
    Nice Account QOS JobState Reason Dependency Requeue Restarts BatchFlag Reboot ExitCode
    RunTime TimeLimit TimeMin SubmitTime EligibleTime AccrueTime StartTime EndTime Deadline
    SuspendTime SecsPreSuspend LastSchedEval Scheduler Partition AllocNode:Sid ReqNodeList
    ExcNodeList NodeList BatchHost NumNodes NumCPUs NumTasks CPUs/Task ReqB:S:C:T TRES
    Socks/Node NtasksPerN:B:S:C CoreSpec MinCPUsNode MinMemoryNode MinMemoryCPU
    MinTmpDiskNode Features DelayBoot OverSubscribe Contiguous Licenses Network Command
    WorkDir AdminComment SystemComment Comment StdErr StdIn StdOut Power"""
_NODE_ORDER_22_05 = """
    NodeName Arch CoresPerSocket CPUAlloc CPUEfctv CPUTot CPULoad AvailableFeatures
    ActiveFeatures Gres NodeAddr NodeHostName Port Version OS RealMemory AllocMem FreeMem
    Sockets Boards State ThreadsPerCore TmpDisk Weight Owner MCS_label Partitions BootTime
    SlurmdStartTime LastBusyTime CfgTRES AllocTRES CapWatts CurrentWatts AveWatts
    ExtSensorsJoules ExtSensorsWatts ExtSensorsTemp Reason"""
JOB_KEY_ORDER = {key: rank for rank, key in enumerate(_JOB_ORDER_22_05.split())}
NODE_KEY_ORDER = {key: rank for rank, key in enumerate(_NODE_ORDER_22_05.split())}
KNOWN_KEYS = frozenset(JOB_KEY_ORDER) | frozenset(NODE_KEY_ORDER)
FREE_TEXT_KEYS = frozenset(
    {"Comment", "AdminComment", "SystemComment", "Command", "WorkDir", "StdErr", "StdIn"}
    | {"StdOut", "OS", "Reason", "JobName", "Dependency"}
)
# Printed for every job (node) by 22.05: a record without one of them was split at a fake
# key (a job name "x Comment=y" would swallow every field up to the real comment).
REQUIRED_JOB_KEYS: tuple[str, ...] = ("JobId", "JobName", "UserId", "JobState", "Restarts")
REQUIRED_JOB_KEYS += ("Partition", "NodeList", "NumNodes")
REQUIRED_NODE_KEYS = ("NodeName", "State")
MAX_RECORD_CHARS = 1 << 20
"""A longer ``scontrol -o`` line (a megabyte of comment) is refused, not parsed."""
_REASON_STAMP = re.compile(r"\s*\[[^\[\]@]*@[^\[\]]*\]\s*$")
_NULL = ("(null)", "N/A", "")


def _ambiguous(line: str, key: str, why: str) -> SchedulerError:
    BAD_INPUT.count(BadInput.SCONTROL_RECORD)
    head = line.split(" ", 1)[0][:40]
    return SchedulerError(f"scontrol show: record {head}: ambiguous '{key}=' ({why}): refused")


def parse_scontrol_record(line: str) -> dict[str, str]:
    """One ``scontrol -o`` line as a dict (values stripped, '(null)' kept as is).

    scontrol does not escape values, so a job name, comment or path may contain text that
    looks like another field (``--comment "x StdOut=/etc/shadow"``). A known key starts a
    field only in Slurm's own order and only once; "Key=" inside a free-text value that
    could not be that field (its key comes earlier) is text. A record that can be read two
    ways (the key could be the real field or text) raises SchedulerError: refused, never
    guessed."""
    if len(line) > MAX_RECORD_CHARS:
        raise _ambiguous(line, "", f"record over {MAX_RECORD_CHARS} characters")
    order = NODE_KEY_ORDER if line.startswith("NodeName=") else JOB_KEY_ORDER
    fields: dict[str, str] = {}
    key: str | None = None
    key_rank = -1
    start = 0
    for m in _KEY.finditer(line):
        name = m.group(1)
        rank = order.get(name)
        if key is not None:
            repeated = name in fields or name == key
            in_order = rank is not None and rank > key_rank and not repeated
            if key in FREE_TEXT_KEYS:
                if rank is None or not in_order:
                    if rank is not None and rank >= order.get(key, -1):
                        # e.g. "StdOut=" inside StdOut's own value, or a second "StdOut="
                        # after one that came from a comment: either could be the real one.
                        raise _ambiguous(line, name, f"repeated inside the value of {key}")
                    continue  # "a=b" or an earlier field's key inside a comment: text
            elif rank is not None and not in_order:
                raise _ambiguous(line, name, f"repeated or out of order after {key}")
            fields[key] = line[start : m.start()].strip()
        key, start = name, m.end()
        if rank is not None:
            key_rank = rank
    if key is not None:
        fields[key] = line[start:].strip()
    return fields


def _record(line: str, required: tuple[str, ...]) -> dict[str, str]:
    fields = parse_scontrol_record(line)
    missing = [k for k in required if k not in fields]
    if missing:
        raise _ambiguous(line, missing[0], "missing: a value swallowed it")
    return fields


def _first_record(text: str, key: str, command: str, required: tuple[str, ...]) -> dict[str, str]:
    """The fields of the first ``key=...`` line of ``command``'s output (``-o``: a record a
    line)."""
    line = next((ln for ln in text.splitlines() if ln.startswith(f"{key}=")), None)
    if line is None:
        raise SchedulerError(f"{command}: no {key}= record in {text[:120]!r}")
    return _record(line, required)


def _value(fields: dict[str, str], key: str) -> str:
    value = fields.get(key, "")
    return "" if value in _NULL else value


def _int(fields: dict[str, str], key: str) -> int:
    """Leading digits (``NumNodes=2-4`` is a range: its minimum); 0 when there are none or
    too many to be a count."""
    m = re.match(r"\d+", _value(fields, key))
    return (small_int(m.group()) or 0) if m else 0


def _hosts(fields: dict[str, str], key: str) -> tuple[str, ...]:
    try:
        return expand_hostlist(_value(fields, key))
    except HostlistError as err:
        raise SchedulerError(f"scontrol show: {key}: {err}") from None


@dataclass(frozen=True, slots=True)
class JobDetails:
    """What ``scontrol -o show job`` adds to squeue's view: resolved output paths, node count,
    batch host, exclusions, restart count."""

    job_id: str
    state: JobState
    name: str = ""
    reason: str = ""
    held: bool = False
    attempt: int = 0
    requeue: bool = False
    node_count: int = 0
    nodes: tuple[str, ...] = ()
    batch_host: str = ""
    excluded_nodes: tuple[str, ...] = ()
    required_nodes: tuple[str, ...] = ()
    stdout_path: str = ""
    stderr_path: str = ""
    comment: str = ""
    partition: str = ""
    user: str = ""


def parse_scontrol_job(text: str) -> JobDetails:
    """The first record of ``scontrol -o show job ID``."""
    f = _first_record(text, "JobId", "scontrol show job", REQUIRED_JOB_KEYS)
    job_id = f["JobId"]
    if _value(f, "ArrayTaskId") and _value(f, "ArrayJobId"):
        job_id = f"{f['ArrayJobId']}_{f['ArrayTaskId']}"
    state = job_state(f.get("JobState", "UNKNOWN"))
    reason = _value(f, "Reason")
    reason = "" if reason == "None" else reason
    requeued_held = reason == "job_requeued_in_held_state"
    held = (state is JobState.PENDING and (reason in HELD_REASONS or _int(f, "Priority") == 0)) or (
        # right after requeuehold the job is COMPLETING, already held
        state in (JobState.PENDING, JobState.COMPLETING) and requeued_held
    )
    return JobDetails(
        job_id=job_id,
        state=state,
        name=_value(f, "JobName"),
        reason=reason,
        held=held,
        attempt=_int(f, "Restarts"),
        requeue=_value(f, "Requeue") == "1",
        node_count=_int(f, "NumNodes"),
        nodes=_hosts(f, "NodeList"),
        batch_host=_value(f, "BatchHost"),
        excluded_nodes=_hosts(f, "ExcNodeList"),
        required_nodes=_hosts(f, "ReqNodeList"),
        stdout_path=_value(f, "StdOut"),
        stderr_path=_value(f, "StdErr"),
        comment=_value(f, "Comment"),
        partition=_value(f, "Partition"),
        user=_value(f, "UserId").split("(", 1)[0],
    )


@dataclass(frozen=True, slots=True)
class NodeDetails:
    name: str
    state: NodeState
    drain: bool
    reason: str  # without the "[user@time]" stamp scontrol appends
    raw_state: str = ""


def parse_scontrol_node(text: str) -> NodeDetails:
    """``scontrol -o show node NAME``: state (``MIXED+DRAIN``, ``IDLE*``) and drain reason."""
    f = _first_record(text, "NodeName", "scontrol show node", REQUIRED_NODE_KEYS)
    raw = f.get("State", "UNKNOWN")
    parts = raw.upper().split("+")
    base = parts[0].rstrip("*~#$@^-!%")
    flags = set(parts[1:])
    if base == "DOWN":
        state = NodeState.DOWN
    elif base == "FAIL" or "FAIL" in flags:
        state = NodeState.FAIL
    elif parts[0].endswith("*") or "NOT_RESPONDING" in flags:
        state = NodeState.NOT_RESPONDING
    else:
        state = {
            "IDLE": NodeState.IDLE,
            "ALLOCATED": NodeState.ALLOCATED,
            "MIXED": NodeState.MIXED,
        }.get(base, NodeState.UNKNOWN)
    drain = bool(flags & {"DRAIN", "DRAINING", "DRAINED"}) or base in ("DRAINED", "DRAINING")
    return NodeDetails(
        name=f["NodeName"],
        state=state,
        drain=drain,
        reason=_REASON_STAMP.sub("", _value(f, "Reason")),
        raw_state=raw,
    )
