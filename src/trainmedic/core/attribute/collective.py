"""Collective timeouts: what the ranks say about each other, before calling one "unknown".

A watchdog timeout only says that a collective did not complete. Who is to blame shows in
what the ranks say about each other (each rule a mechanism, in order of trust):

* **different collectives**: ranks timed out in collectives of different types at their
  positions (rank 0 in ALLREDUCE, rank 3 in ALLGATHER at one SeqNum; SeqNums far apart are
  different groups, ``culprit.one_sequence``), NCCL's own trace shows processes in
  different operations at the same opCount, or an analyser (Flight Recorder, DeepSpeed's trace
  check, c10d's debug mode) says the ranks did not join the same collective: the program
  issued different collectives on different ranks (an application desync);
* **the program was elsewhere**: the rank's own frames wait in another collective than the
  one that timed out (``dist.all_reduce`` while the watchdog's op is an ALLGATHER);
* **the training loop had ended**: the trainer reported its end (``Trainer.fit`` stopped at
  max_epochs, "training finished") before the collective that never completed: a collective
  only some ranks make after training (a rank-0-only save, evaluation or barrier);
* **one rank in another phase**: the last thing printed is a non-training bar (evaluation,
  predictions, tokenising, saving) and the rest timed out meanwhile: one rank worked alone.

A peer that died shows instead as its own error (a primary event, handled before this) or as
the one rank that did not time out (the culprit, named by ``culprit.py``); a fabric that
stalled shows as network errors among the cascades. Neither is decided here.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from trainmedic.core.attribute.culprit import event_rank, one_sequence
from trainmedic.core.attribute.phase import PhaseFinding
from trainmedic.core.logparse.collective import CollectiveTrace
from trainmedic.core.logparse.summary import ProgressSummary
from trainmedic.core.logparse.timeline import Timeline
from trainmedic.core.model import Category, Event, Kind

_WORK = re.compile(r"SeqNum=(\d+),\s*OpType=(\w+)")
_OPTYPE = re.compile(r"OpType=(\w+)")
_PG = re.compile(r"PG (?:ID )?(\d+)")
_NON_TRAINING = re.compile(
    r"(?i)eval|valid|predict|test|infer|generat|token|preprocess|prepar|build|load|sav(?:e|ing)"
    r"|export|download|index|map|filter|sampl"
)
_TRAINING = re.compile(r"(?i)epoch|train|step|iter|batch|fit")

# NCCL OpType and Python collective names, both to one vocabulary
_OP_NAMES = {
    "allreduce": "all_reduce",
    "all_reduce": "all_reduce",
    "allgather": "all_gather",
    "all_gather": "all_gather",
    "all_gather_into_tensor": "all_gather",
    "all_gather_base": "all_gather",
    "all_gather_object": "all_gather",
    "broadcast": "broadcast",
    "broadcast_object_list": "broadcast",
    "reducescatter": "reduce_scatter",
    "reduce_scatter": "reduce_scatter",
    "reduce_scatter_tensor": "reduce_scatter",
    "alltoall": "all_to_all",
    "all_to_all": "all_to_all",
    "all_to_all_single": "all_to_all",
    "barrier": "barrier",
    "monitored_barrier": "barrier",
    "reduce": "reduce",
    "gather": "gather",
    "scatter": "scatter",
    "send": "send",
    "recv": "recv",
}


def op_name(raw: str) -> str:
    """``_ALLGATHER_BASE`` / ``AllGather`` / ``all_gather_into_tensor`` -> ``all_gather``."""
    key = raw.strip("_").lower()
    for suffix in ("_base", "_coalesced"):
        if key.endswith(suffix) and key[: -len(suffix)] in _OP_NAMES:
            key = key[: -len(suffix)]
    return _OP_NAMES.get(key, key)


def _desync(kind: str, basis: str, confidence: float) -> PhaseFinding:
    return PhaseFinding(
        Category.APPLICATION,
        Kind.HANG,
        confidence,
        f"{kind}: {basis}; the program issued different collectives on different ranks "
        "(an application desync), not a peer that died or a fabric that stalled",
    )


def _different_types(timeouts: Sequence[Event]) -> PhaseFinding | None:
    by_rank: dict[tuple[str | None, int], tuple[str, int | None]] = {}
    for event in timeouts:
        m = _WORK.search(event.text) or _OPTYPE.search(event.text)
        rank = event_rank(event)
        if m is None or rank is None:
            continue
        pg = _PG.search(event.text)
        seq = int(m.group(1)) if m.re is _WORK else None
        by_rank[(pg.group(1) if pg else None, rank)] = (op_name(m.groups()[-1]), seq)
    for group in {g for g, _ in by_rank}:
        works = {r: work for (g, r), work in by_rank.items() if g == group}
        ops = {r: op for r, (op, _) in works.items()}
        if not one_sequence([s for _, s in works.values() if s is not None]):
            continue
        if len(set(ops.values())) > 1:
            shown = ", ".join(f"rank {r} in {op}" for r, op in sorted(ops.items())[:4])
            return _desync("ranks timed out in different collectives", shown, 0.55)
    return None


def nccl_trace_desync(trace: CollectiveTrace | None) -> PhaseFinding | None:
    """The NCCL trace alone (no timeout printed yet): ranks in different operations at one
    opCount cannot complete it, whatever else the log says."""
    return _nccl_trace(trace) if trace is not None else None


def _nccl_trace(trace: CollectiveTrace) -> PhaseFinding | None:
    """Processes of one communicator size in different operations at one opCount. Only for
    processes whose recent operations all used one communicator: two communicators of one size
    (tensor and data parallel groups) count their operations separately."""
    comms: dict[str, set[str]] = {}
    last: dict[str, tuple[int, str, int]] = {}
    for record in trace.nccl_ops:
        comms.setdefault(record.process, set()).add(record.comm)
        last[record.process] = (record.count, record.op, record.nranks)
    by_count: dict[tuple[int, int], dict[str, str]] = {}
    for process, (count, name, nranks) in last.items():
        if len(comms[process]) == 1:
            by_count.setdefault((nranks, count), {})[process] = name
    for (nranks, count), ops in sorted(by_count.items()):
        if len(ops) > 1 and len(set(ops.values())) > 1:
            shown = ", ".join(f"{p} {o}" for p, o in sorted(ops.items())[:4])
            return _desync(
                f"NCCL's trace shows ranks in different operations at opCount {count:x} "
                f"(communicators of {nranks})",
                shown,
                0.5,
            )
    return None


def _frames_elsewhere(timeouts: Sequence[Event], trace: CollectiveTrace) -> PhaseFinding | None:
    timed = {op_name(m.group(1)) for e in timeouts if (m := _OPTYPE.search(e.text))}
    waited = {op_name(f.op) for f in trace.frame_ops}
    if len(timed) != 1 or not waited or timed & waited:
        return None
    return _desync(
        "the program waited in another collective than the one that timed out",
        f"frames in {', '.join(sorted(waited))}, timed-out {next(iter(timed))}",
        0.45,
    )


def collective_finding(
    timeouts: Sequence[Event],
    trace: CollectiveTrace | None,
    timelines: Sequence[Timeline] = (),
    progress: ProgressSummary | None = None,
) -> PhaseFinding | None:
    """The mechanism behind collective timeouts, when the ranks' reports show one."""
    if not timeouts:
        return None
    trace = trace or CollectiveTrace()
    if trace.notes:
        _, text = trace.notes[0]
        return _desync("an analyser or framework reports diverged ranks", f"{text!r}", 0.6)
    found = (
        _different_types(timeouts)
        or _nccl_trace(trace)
        or _frames_elsewhere(timeouts, trace)
        or _loop_ended(timeouts, timelines)
        or _other_phase(progress)
    )
    return found


def _loop_ended(timeouts: Sequence[Event], timelines: Sequence[Timeline]) -> PhaseFinding | None:
    """A file's end-of-training mark above a timeout of the same file."""
    ended = {t.source: t.finished_line for t in timelines if t.finished_line is not None}
    if not any(e.source in ended and ended[e.source] < e.line for e in timeouts):
        return None
    return PhaseFinding(
        Category.APPLICATION,
        Kind.HANG,
        0.45,
        "the training loop had reported its end before a collective that never completed: a "
        "collective only some ranks make after training (a rank-0-only save, evaluation or "
        "barrier), an application desync",
    )


def _other_phase(progress: ProgressSummary | None) -> PhaseFinding | None:
    label = progress.last_label if progress else ""
    if not label or _TRAINING.search(label) or not _NON_TRAINING.search(label):
        return None
    return PhaseFinding(
        Category.APPLICATION,
        Kind.HANG,
        0.4,
        f"the last progress printed was '{label[:60]}', not training: one rank worked in that "
        "phase while the others waited in a collective until the watchdog fired",
    )


COLLECTIVE_TIMEOUTS = frozenset(
    {
        "nccl.watchdog_timeout",
        "nccl.last_completed",
        "nccl.dump_signal",
        "nccl.communicator_aborted",
        "gloo.timeout",
        # the watchdog thread's stack with its message cut: the timeout it mostly raises
        "nccl.watchdog_thread_stack",
    }
)
"""The catalogue's cascades that say a collective among the ranks ran out of time (not a
store, a rendezvous or a connection: those are reaching a peer, not waiting for one)."""

TIMEOUTS_ALONE_CONFIDENCE = 0.3
"""A guess: below the stop threshold, so the job is restarted, never stopped or drained by it."""


# The worker processes of an inference engine, by the prefix its launcher gives their lines:
# vLLM's Ray actors (RayWorkerVllm up to 0.3, RayWorkerWrapper from 0.4), its multiprocessing
# workers (VllmWorkerProcess) and V1's (VllmWorker rank=N, EngineCore_N / EngineCore_DPn).
_ENGINE_WORKER = re.compile(
    r"\((?:RayWorkerVllm|RayWorkerWrapper|VllmWorkerProcess|VllmWorker|EngineCore_\w+)\b"
    r"[^)]*\bpid=\d+"
)


# The trainer and rollout workers of RL post-training frameworks, by the Ray actor class that
# prefixes their lines: verl (WorkerDict, the colocated class; ActorRolloutRefWorker,
# CriticWorker, AgentLoopWorker, vLLMHttpServer), OpenRLHF (PolicyModelActor, CriticModelActor,
# ReferenceModelActor, RewardModelActor, LLMRayActor), NeMo-RL (MegatronPolicyWorker,
# DTensorPolicyWorker, VllmGenerationWorker), SkyRL (AsyncVLLMInferenceEngine, PolicyWorker)
# and slime (MegatronTrainRayActor, RolloutManager).
_RL_FRAMEWORK_WORKER = re.compile(
    r"\((?:WorkerDict|\w*ActorRolloutRefWorker|CriticWorker|RewardModelWorker|AgentLoopWorker"
    r"|vLLMHttpServer\w*|\w*(?:Policy|Critic|Reference|Reward)ModelActor|LLMRayActor"
    r"|\w*PolicyWorker\w*|Vllm\w*GenerationWorker|AsyncVLLMInferenceEngine"
    r"|\w*TrainRayActor|RolloutManager)\b[^)]*\bpid=\d+"
)


def in_rl_framework_workers(events: Sequence[Event]) -> bool:
    """Whether every line is printed by an RL framework's trainer or rollout worker: the
    framework, not the user's code, sets such a job up and issues its collectives, so a
    collective that never completed there is not "the ranks diverged in the user's setup"."""
    return bool(events) and all(_RL_FRAMEWORK_WORKER.search(e.text) for e in events)


def timeouts_alone(cascades: Sequence[Event]) -> PhaseFinding | None:
    """Every cascade is a collective timeout and nothing else failed: no peer's error, no
    network or hardware line, no rank's report telling who waited where. Most such timeouts
    are the ranks' own code apart (one rank behind in its data, its evaluation or a branch the
    others did not take); a fabric or GPU that stalls leaves lines of its own, and those are
    read before this. A guess, said as one."""
    if not cascades or any(e.signature not in COLLECTIVE_TIMEOUTS for e in cascades):
        return None
    if all(_ENGINE_WORKER.search(e.text) for e in cascades):
        # the engine, not the user, issues every collective its workers make (tensor-parallel
        # all-reduces, gathers of logits): their hang is the engine's own stack, its custom
        # all-reduce or its scheduling of the workers
        return PhaseFinding(
            Category.SYSTEM_SOFTWARE,
            Kind.HANG,
            TIMEOUTS_ALONE_CONFIDENCE,
            "collective timeouts and nothing else, all in an inference engine's worker "
            "processes: the engine issues those collectives, not the user's code (a guess, "
            "restart)",
        )
    if in_rl_framework_workers(cascades):
        # an RL framework's user writes a config and a reward; the framework issues the
        # trainer's collectives, the weight sync into the rollout engines and the hand-over
        # between the two, so their stall is the framework's synchronisation (verl's rollout
        # DP > 1 on the default group), not ranks of the user's code apart
        return PhaseFinding(
            Category.SYSTEM_SOFTWARE,
            Kind.HANG,
            TIMEOUTS_ALONE_CONFIDENCE,
            "collective timeouts and nothing else, all in an RL framework's trainer or rollout "
            "workers: the framework issues those collectives and the weight sync, not the "
            "user's code (a guess, restart)",
        )
    return PhaseFinding(
        Category.APPLICATION,
        Kind.HANG,
        TIMEOUTS_ALONE_CONFIDENCE,
        "collective timeouts and nothing else: no peer's error, no link or device line; most "
        "often one rank behind the others in its own work (a guess, restart)",
    )
