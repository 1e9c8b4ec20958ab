"""Pure parsers of ``scontrol -o show job ID`` and ``scontrol -o show node NAME`` (22.05 has
no ``--json`` for scontrol). One record per line: ``Key=value`` pairs separated by spaces,
where some values (Comment, Command, OS, Reason ...) may contain spaces themselves."""

from __future__ import annotations

import re
from dataclasses import dataclass

from trainmedic.core.errors import SchedulerError
from trainmedic.core.states import JobState, NodeState
from trainmedic.schedulers.slurm.hostlist import HostlistError, expand_hostlist
from trainmedic.schedulers.slurm.parse import HELD_REASONS, job_state

_KEY = re.compile(r"(?:^|(?<=\s))([A-Za-z][A-Za-z0-9_/:]*)=")
# Every key 22.05 prints for a job or a node: inside a free-text value only these end it.
_KNOWN_KEYS_22_05 = """
    JobId JobName UserId GroupId MCS_label Priority Nice Account QOS JobState Reason
    Dependency Requeue Restarts BatchFlag Reboot ExitCode DerivedExitCode RunTime TimeLimit
    TimeMin SubmitTime EligibleTime AccrueTime StartTime EndTime Deadline SuspendTime
    SecsPreSuspend LastSchedEval Scheduler Partition AllocNode:Sid ReqNodeList ExcNodeList
    NodeList BatchHost NumNodes NumCPUs NumTasks CPUs/Task ReqB:S:C:T TRES Socks/Node
    NtasksPerN:B:S:C CoreSpec MinCPUsNode MinMemoryNode MinTmpDiskNode Features DelayBoot
    OverSubscribe Contiguous Licenses Network Command WorkDir StdErr StdIn StdOut Power
    Comment AdminComment SystemComment ArrayJobId ArrayTaskId ArrayTaskThrottle
    NodeName Arch CoresPerSocket CPUAlloc CPUEfctv CPUTot CPULoad AvailableFeatures
    ActiveFeatures Gres NodeAddr NodeHostName Port Version OS RealMemory AllocMem FreeMem
    Sockets Boards State ThreadsPerCore TmpDisk Weight Owner Partitions BootTime
    SlurmdStartTime LastBusyTime CfgTRES AllocTRES CapWatts CurrentWatts AveWatts
    ExtSensorsJoules ExtSensorsWatts ExtSensorsTemp GresUsed"""
KNOWN_KEYS = frozenset(_KNOWN_KEYS_22_05.split())
FREE_TEXT_KEYS = frozenset(
    {"Comment", "AdminComment", "SystemComment", "Command", "WorkDir", "StdErr", "StdIn"}
    | {"StdOut", "OS", "Reason", "JobName", "Dependency"}
)
_REASON_STAMP = re.compile(r"\s*\[[^\[\]@]*@[^\[\]]*\]\s*$")
_NULL = ("(null)", "N/A", "")


def parse_scontrol_record(line: str) -> dict[str, str]:
    """One ``scontrol -o`` line as a dict (values stripped, '(null)' kept as is)."""
    fields: dict[str, str] = {}
    key: str | None = None
    start = 0
    for m in _KEY.finditer(line):
        name = m.group(1)
        if key is not None and key in FREE_TEXT_KEYS and name not in KNOWN_KEYS:
            continue  # "a=b" inside a comment or command line, not a new field
        if key is not None:
            fields[key] = line[start : m.start()].strip()
        key, start = name, m.end()
    if key is not None:
        fields[key] = line[start:].strip()
    return fields


def _value(fields: dict[str, str], key: str) -> str:
    value = fields.get(key, "")
    return "" if value in _NULL else value


def _int(fields: dict[str, str], key: str) -> int:
    """Leading digits (``NumNodes=2-4`` is a range: its minimum); 0 when there are none."""
    m = re.match(r"\d+", _value(fields, key))
    return int(m.group()) if m else 0


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
    line = next((ln for ln in text.splitlines() if ln.startswith("JobId=")), None)
    if line is None:
        raise SchedulerError(f"scontrol show job: no JobId= record in {text[:120]!r}")
    f = parse_scontrol_record(line)
    job_id = f["JobId"]
    if _value(f, "ArrayTaskId"):
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
    line = next((ln for ln in text.splitlines() if ln.startswith("NodeName=")), None)
    if line is None:
        raise SchedulerError(f"scontrol show node: no NodeName= record in {text[:120]!r}")
    f = parse_scontrol_record(line)
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
