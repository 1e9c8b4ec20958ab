"""What a job's own opt-in (its Slurm comment, or ``POST /jobs``) may change in ``[policy]``.

A job may tighten what trainmedic does to that job, never loosen what trainmedic may do to
shared nodes. Whoever submits a job controls its comment, so every key a job sets is checked
against the operator's ``[policy]``; anything else is refused with one line saying why:

================================  ==========================================================
job key                           a job may ...
================================  ==========================================================
stop_enforcement                  turn it on (its stop advice cancels it), never off
max_attempts_without_checkpoint   lower it (1 .. the operator's value)
retry_budget.<category>           lower it (0 .. the operator's value)
drain_enabled, max_drain_         never: drain limits, the circuit breaker and the repeat-
fraction, drain_window_s,         offender rule decide what happens to shared nodes and are
repeat_offender_count,            the operator's only
repeat_offender_window_s
mode, action_jobs, ...            never: action mode is the operator's ([service], [watch])
================================  ==========================================================

``JOB_KEYS`` and ``OPERATOR_ONLY`` are this table as data; a test checks that every field of
``PolicyConfig`` is in exactly one of them, so a new policy key is refused to jobs until
someone decides which side it is on.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from enum import StrEnum
from types import MappingProxyType
from typing import Any

from trainmedic.core.errors import ConfigError
from trainmedic.core.policy.config import PolicyConfig, RetryBudgets
from trainmedic.core.tomlschema import as_plain_dict, build


class Tighten(StrEnum):
    """How a job may move a key away from the operator's value."""

    LOWER = "lower"  # a number at most the operator's
    ENABLE = "enable"  # a switch the job may turn on, never off


JOB_KEYS: Mapping[str, Tighten] = MappingProxyType(
    {
        "stop_enforcement": Tighten.ENABLE,
        "max_attempts_without_checkpoint": Tighten.LOWER,
        "retry_budget": Tighten.LOWER,  # each category's budget
    }
)
OPERATOR_ONLY: frozenset[str] = frozenset(
    {
        "drain_enabled",
        "max_drain_fraction",
        "drain_window_s",
        "repeat_offender_count",
        "repeat_offender_window_s",
    }
)
# Settings that live outside [policy] but that a job might try to set from its comment.
_SERVICE_ONLY: Mapping[str, str] = MappingProxyType(
    {
        "mode": "[service] mode",
        "action": "[service] mode",
        "action_jobs": "[watch] action_jobs",
        "action_partitions": "[watch] action_partitions",
    }
)
_MAX_SHOWN = 60  # characters of a refused value quoted back


def allowed_keys() -> str:
    budgets = ", ".join(f.name for f in dataclasses.fields(RetryBudgets))
    return (
        "stop_enforcement (on only), max_attempts_without_checkpoint (lower only), "
        f"retry_budget.{{{budgets}}} (lower only)"
    )


def job_policy(base: PolicyConfig, overrides: Mapping[str, Any], source: str) -> PolicyConfig:
    """The operator's ``base`` tightened by a job's ``overrides``; ConfigError naming
    ``source`` (e.g. "job 7 comment") and the key for anything a job may not set."""
    for key in overrides:
        if key in OPERATOR_ONLY:
            raise ConfigError(
                f"{source}: 'policy.{key}' is the operator's only: drain limits, the circuit "
                "breaker and the repeat-offender count are set in the service's [policy], never "
                f"by a job; a job may set {allowed_keys()}"
            )
        if key in _SERVICE_ONLY:
            raise ConfigError(
                f"{source}: '{key}' is the operator's only ({_SERVICE_ONLY[key]}); a job may set "
                f"{allowed_keys()}"
            )
        if key not in JOB_KEYS:
            raise ConfigError(
                f"{source}: unknown key 'policy.{_shown(key)}'; a job may set {allowed_keys()}"
            )
    merged = as_plain_dict(base)
    for key, value in overrides.items():
        if key == "retry_budget" and isinstance(value, Mapping):
            merged[key] = {**merged[key], **value}
        else:
            merged[key] = value
    policy = build(PolicyConfig, merged, source, prefix="policy.")
    for key, how in JOB_KEYS.items():
        if key == "retry_budget":
            for budget in dataclasses.fields(RetryBudgets):
                _check(
                    source,
                    f"retry_budget.{budget.name}",
                    how,
                    getattr(base.retry_budget, budget.name),
                    getattr(policy.retry_budget, budget.name),
                )
        else:
            _check(source, key, how, getattr(base, key), getattr(policy, key))
    return policy


def _check(source: str, key: str, how: Tighten, operator: object, job: object) -> None:
    if how is Tighten.ENABLE and operator is True and job is False:
        raise ConfigError(
            f"{source}: policy.{key} = false would loosen the operator's true: a job may only turn "
            "it on"
        )
    if (
        how is Tighten.LOWER
        and isinstance(job, int)
        and isinstance(operator, int)
        and job > operator
    ):
        floor = 1 if key == "max_attempts_without_checkpoint" else 0
        raise ConfigError(
            f"{source}: policy.{key} = {_shown(job)} would loosen the operator's {operator}: "
            f"a job may only lower it ({floor}..{operator})"
        )


def _shown(value: object) -> str:
    """``value`` quoted back, cut short (a key or number from a job comment may be huge)."""
    if isinstance(value, int) and value.bit_length() > 4 * _MAX_SHOWN:
        return f"a {value.bit_length()}-bit number"  # str() of a huge int raises
    text = str(value)
    return text if len(text) <= _MAX_SHOWN else f"{text[:_MAX_SHOWN]}...({len(text)} chars)"
