"""Which scheduler jobs to watch without being told: jobs that opt in through a JSON policy in
their comment (``--comment='{"trainmedic": {"checkpoint_dir": ..., "retry_budget": ...}}'``)
or that match the ``[watch]`` criteria of the config (partition, user, name pattern, ids).

Pure: a snapshot and the config in, registrations out. The comment's ``checkpoint_dir`` and
``progress_regex`` (the job's own progress format, else ``[watch] progress_regex``; one that
is unusable is reported and the known formats are read) go to the job spec; every other
key is a per-job override of ``[policy]`` that may only tighten it
(``core.policy.overrides``: never drain limits, the breaker, the repeat-offender count or
action mode), validated here so a refused policy is reported once, naming the job and the
key, and the job is still watched with the operator's policy.
"""

from __future__ import annotations

import logging
import os.path
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from trainmedic.core.badinput import BAD_INPUT, BadInput
from trainmedic.core.errors import ConfigError
from trainmedic.core.logparse.declared import compile_progress_regex
from trainmedic.core.policy.config import PolicyConfig
from trainmedic.core.policy.overrides import job_policy as tightened
from trainmedic.schedulers.base import JobInfo
from trainmedic.schedulers.slurm.policy import parse_job_policy
from trainmedic.service.config.sections import WatchConfig
from trainmedic.store import JobSpec

log = logging.getLogger(__name__)

SPEC_KEYS = frozenset({"checkpoint_dir", "progress_regex"})


@dataclass(frozen=True, slots=True)
class Discovered:
    job_id: str
    name: str
    spec: JobSpec
    why: str


def _criteria(watch: WatchConfig) -> bool:
    return bool(watch.partitions or watch.users or watch.name_pattern or watch.jobs)


MAX_COMMENT_CHARS = 16 * 1024
"""A job comment longer than this is not read as a policy (a policy is a few hundred bytes)."""
MAX_COMMENT_DEPTH = 8
"""Deepest nesting of objects and arrays read from a comment (a policy needs 3); a deeper
one would make ``json.loads`` recurse until RecursionError."""


def comment_over_limits(comment: str) -> str | None:
    """Why a job's comment is refused before it is parsed as JSON, or None when it is within
    the limits. One linear scan: brackets inside JSON strings do not count."""
    if len(comment) > MAX_COMMENT_CHARS:
        return f"comment of {len(comment)} characters, over {MAX_COMMENT_CHARS}"
    depth = deepest = 0
    in_string = escaped = False
    for ch in comment:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    if deepest > MAX_COMMENT_DEPTH:
        return f"comment nested {deepest} deep, over {MAX_COMMENT_DEPTH}"
    return None


def job_policy(job: JobInfo, base: PolicyConfig) -> tuple[dict[str, Any] | None, str]:
    """(policy overrides or None when not opted in, a note when the policy was refused)."""
    refused = comment_over_limits(job.comment)
    if refused is not None:
        BAD_INPUT.count(BadInput.JOB_COMMENT)
        return None, f"job {job.job_id}: {refused}: comment ignored"
    try:
        policy = parse_job_policy(job.comment)
    except ConfigError as exc:
        return {}, f"job {job.job_id}: {exc}; watching it with the default policy"
    if policy is None:
        return None, ""
    notes: list[str] = []
    if "progress_regex" in policy:
        try:
            compile_progress_regex(policy["progress_regex"], f"job {job.job_id} progress_regex")
        except ConfigError as exc:
            policy = {k: v for k, v in policy.items() if k != "progress_regex"}
            notes.append(f"{exc}; reading its progress in the known formats")
    overrides = {k: v for k, v in policy.items() if k not in SPEC_KEYS}
    try:
        tightened(base, overrides, f"job {job.job_id} comment")
    except ConfigError as exc:
        policy = {k: v for k, v in policy.items() if k in SPEC_KEYS}
        notes.append(f"{exc}; watching it with the operator's policy")
    return policy, "; ".join(notes)


def discover(
    jobs: Iterable[JobInfo],
    watch: WatchConfig,
    policy: PolicyConfig,
    known: Collection[str],
    kernel_log_template: str = "",
) -> list[Discovered]:
    found: list[Discovered] = []
    for job in jobs:
        if job.job_id in known or job.state.is_terminal():
            continue
        overrides, note = job_policy(job, policy)
        if note:
            log.warning("%s", note)
        if overrides is not None:
            why = "opted in through its comment"
        elif _criteria(watch) and watch.watches(
            job.job_id, partition=job.partition, user=job.user, name=job.name
        ):
            why = "matches [watch]"
            overrides = {}
        else:
            continue
        logs = tuple(dict.fromkeys(p for p in (job.stdout_path, job.stderr_path) if p))
        kernel = (
            {n: kernel_log_template.format(node=n) for n in job.nodes}
            if kernel_log_template
            else {}
        )
        spec = JobSpec(
            log_paths=logs,
            kernel_logs=kernel,
            checkpoint_dir=str(overrides.get("checkpoint_dir", "")),
            progress_regex=str(overrides.get("progress_regex", watch.progress_regex)),
            nodes=job.nodes,
            partition=job.partition,
            user=job.user,
            policy={k: v for k, v in overrides.items() if k not in SPEC_KEYS},
        )
        found.append(Discovered(job.job_id, job.name, spec, why))
    return found


def check_kernel_logs(
    kernel_logs: Mapping[str, str], log_paths: Sequence[str], template: str
) -> None:
    """A registration's per-node kernel logs must be the cluster's own: the operator's
    ``kernel_log_template`` path of that node when one is configured, and never one of the
    job's own logs (its output would pass for kernel evidence, which may drain the node).
    ConfigError naming the node."""
    own = {os.path.normpath(p) for p in log_paths}
    for node, path in kernel_logs.items():
        expected = template.format(node=node) if template else path
        if path != expected:
            raise ConfigError(
                f"kernel_logs.{node}: {path[:200]!r} is not {node}'s kernel log {expected!r} "
                "(scheduler.slurm.kernel_log_template): kernel evidence is the operator's"
            )
        if os.path.normpath(path) in own:
            raise ConfigError(
                f"kernel_logs.{node}: {path[:200]!r} is one of the job's own logs: a job's "
                "output is never kernel evidence"
            )
