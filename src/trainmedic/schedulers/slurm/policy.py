"""Which Slurm jobs trainmedic watches, and how far it may exclude nodes: pure functions.

A job opts in with a JSON policy in its comment (``--comment='{"trainmedic": {...}}'``:
checkpoint dir, retry budgets, stop enforcement) or is matched by config (partition, user,
job-name glob). An exclusion list persists across requeues in Slurm, so the plan for a
requeue keeps it minimal and never lets it make the job unschedulable.
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from trainmedic.core.errors import ConfigError
from trainmedic.schedulers.base import JobInfo, NodeInfo

POLICY_KEY = "trainmedic"


def parse_job_policy(comment: str) -> dict[str, Any] | None:
    """The job's trainmedic policy from its comment; None when the comment does not opt in.

    ConfigError when it opts in (a JSON object with a "trainmedic" key) with a policy that is
    not a JSON object. The keys themselves are checked by whoever applies the policy.
    """
    text = comment.strip()
    if not text.startswith("{") or POLICY_KEY not in text:
        return None
    try:
        doc = json.loads(text)
    except ValueError:
        return None  # a comment that merely mentions trainmedic is not an opt-in
    if not isinstance(doc, dict) or POLICY_KEY not in doc:
        return None
    policy = doc[POLICY_KEY]
    if not isinstance(policy, dict):
        raise ConfigError(
            f"job comment: '{POLICY_KEY}' must be a JSON object, got {type(policy).__name__}"
        )
    return policy


def _opted_in(job: JobInfo) -> bool:
    try:
        return parse_job_policy(job.comment) is not None
    except ConfigError:
        return True  # opted in with a bad policy: watch it, the policy stage reports why


def select_watched(
    jobs: Iterable[JobInfo],
    partitions: Sequence[str] = (),
    users: Sequence[str] = (),
    name_pattern: str | None = None,
) -> tuple[JobInfo, ...]:
    """Jobs that opted in through their comment, or that match every configured criterion
    (partition in ``partitions``, user in ``users``, name matching the glob ``name_pattern``);
    with no criterion configured only opted-in jobs are watched."""
    configured = bool(partitions or users or name_pattern)
    part_set, user_set = frozenset(partitions), frozenset(users)

    def matches(job: JobInfo) -> bool:
        return (
            configured
            and (not part_set or job.partition in part_set)
            and (not user_set or job.user in user_set)
            and (name_pattern is None or fnmatch.fnmatchcase(job.name, name_pattern))
        )

    return tuple(job for job in jobs if matches(job) or _opted_in(job))


@dataclass(frozen=True, slots=True)
class ExclusionPlan:
    """What a requeue will set as the job's ExcNodeList, and why."""

    exclude: tuple[str, ...]  # the list to set (sorted)
    requested: tuple[str, ...]  # the new exclusions asked for
    dropped: tuple[str, ...]  # exclusions (old or new) left out to keep the job schedulable
    usable_after: int  # nodes the job may still run on (up, not drained, not excluded)
    node_count: int
    note: str = ""
    required: tuple[str, ...] | None = None  # a new ReqNodeList when an exclusion hit it

    @property
    def reset(self) -> bool:
        return not self.exclude and bool(self.dropped)


def plan_exclusion(
    existing: Sequence[str],
    requested: Sequence[str],
    node_count: int,
    candidates: Sequence[NodeInfo],
    required: Sequence[str] = (),
) -> ExclusionPlan:
    """Union of the job's existing exclusions and the new ones, newest first, keeping each
    exclusion only while the job still has ``node_count`` usable nodes among ``candidates``
    (the nodes of its partition). Names not among the candidates are dropped: Slurm rejects
    an ExcNodeList naming an unknown node. A job's required nodes (``-w``) that get excluded
    leave its ReqNodeList: Slurm holds a job whose two lists overlap (BadConstraints)."""
    known = {n.name for n in candidates}
    usable = {n.name for n in candidates if not n.drain and not n.state.is_unhealthy()}
    newest_first = list(dict.fromkeys([*requested, *reversed(existing)]))
    kept: list[str] = []
    dropped: list[str] = []
    unknown: list[str] = []
    remaining = set(usable)
    for name in newest_first:
        if name not in known:
            unknown.append(name)
        elif name not in remaining:
            kept.append(name)  # already unusable: excluding it costs nothing
        elif len(remaining) - 1 >= node_count:
            kept.append(name)
            remaining.discard(name)
        else:
            dropped.append(name)
    notes: list[str] = []
    if dropped:
        notes.append(
            f"dropped exclusions {sorted(dropped)} (kept {sorted(kept) or 'none'}): the job "
            f"needs {node_count} usable nodes and {len(usable)} are up and not drained"
        )
    if unknown:
        notes.append(f"dropped unknown nodes {sorted(unknown)}")
    new_required: tuple[str, ...] | None = None
    if set(required) & set(kept):
        new_required = tuple(n for n in required if n not in kept)
        notes.append(f"required nodes now {list(new_required) or 'none'}")
    return ExclusionPlan(
        exclude=tuple(sorted(kept)),
        requested=tuple(requested),
        dropped=tuple(sorted({*dropped, *unknown})),
        usable_after=len(remaining),
        node_count=node_count,
        note="; ".join(notes),
        required=new_required,
    )
