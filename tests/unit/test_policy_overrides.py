"""A job's opt-in may tighten what trainmedic does to that job, never loosen what it may do to
shared nodes: drain limits, the breaker, the repeat-offender count and action mode are the
operator's (core.policy.overrides; discovery and the decision step apply it)."""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

import pytest

from trainmedic.core.errors import ConfigError
from trainmedic.core.policy.config import PolicyConfig, RetryBudgets
from trainmedic.core.policy.overrides import JOB_KEYS, OPERATOR_ONLY, job_policy
from trainmedic.core.states import JobState
from trainmedic.schedulers.base import JobInfo
from trainmedic.service.config.sections import Config, WatchConfig
from trainmedic.service.decisions import DecisionRecorder
from trainmedic.service.discovery import discover
from trainmedic.store import JobSpec, Store, sqlite_url

OPERATOR = PolicyConfig(stop_enforcement=True, retry_budget=RetryBudgets(hardware=3))


def test_every_policy_key_is_either_a_jobs_or_the_operators() -> None:
    fields = {f.name for f in dataclasses.fields(PolicyConfig)}
    assert set(JOB_KEYS) | OPERATOR_ONLY == fields
    assert not set(JOB_KEYS) & OPERATOR_ONLY


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("drain_enabled", True),
        ("max_drain_fraction", 1.0),
        ("drain_window_s", 1.0),
        ("repeat_offender_count", 1),
        ("repeat_offender_window_s", 1e9),
    ],
)
def test_drain_limits_the_breaker_and_the_offender_rule_are_the_operators(
    key: str, value: object
) -> None:
    with pytest.raises(ConfigError, match=rf"job 7 comment: 'policy.{key}' is the operator's"):
        job_policy(OPERATOR, {key: value}, "job 7 comment")


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"mode": "action"}, r"'mode' is the operator's only \(\[service\] mode\)"),
        ({"action_jobs": ["7"]}, r"'action_jobs' is the operator's only"),
        ({"retry_budgets": 1}, r"unknown key 'policy.retry_budgets'; a job may set"),
        ({"retry_budget": {"hardware": 4}}, r"retry_budget.hardware = 4 would loosen .* 3"),
        ({"max_attempts_without_checkpoint": 9}, r"would loosen the operator's 3: .*\(1..3\)"),
        ({"stop_enforcement": False}, r"stop_enforcement = false would loosen"),
        ({"retry_budget": {"hardware": -1}}, r"retry_budget.hardware must be >= 0"),
        ({"retry_budget": {"gpu": 1}}, r"unknown key 'policy.retry_budget.gpu'"),
        ({"retry_budget": {"hardware": 2**9000}}, r"a 9001-bit number would loosen"),
        ({"max_attempts_without_checkpoint": "2"}, r"must be an integer"),
        ({"x" * 5000: 1}, r"unknown key 'policy.x{60}\.\.\.\(5000 chars\)'"),
    ],
)
def test_unknown_or_loosening_values_are_refused_in_one_line(
    overrides: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        job_policy(OPERATOR, overrides, "job 7 comment")
    assert "\n" not in str(caught.value) and len(str(caught.value)) < 400


def test_a_job_may_tighten_its_own_policy() -> None:
    loose = PolicyConfig()
    tight = job_policy(
        loose,
        {
            "stop_enforcement": True,
            "max_attempts_without_checkpoint": 1,
            "retry_budget": {"hardware": 0, "application": 1},
        },
        "job 7 comment",
    )
    assert tight.stop_enforcement and tight.max_attempts_without_checkpoint == 1
    assert tight.retry_budget == dataclasses.replace(loose.retry_budget, hardware=0)
    assert (tight.max_drain_fraction, tight.repeat_offender_count) == (0.25, 2)


def _job(comment: object) -> JobInfo:
    return JobInfo(
        "7", JobState.RUNNING, nodes=("node1",), stdout_path="/l/7.out", comment=json.dumps(comment)
    )


def test_discovery_refuses_a_loosening_comment_and_watches_with_the_operators_policy(
    caplog: pytest.LogCaptureFixture,
) -> None:
    comment = {"trainmedic": {"checkpoint_dir": "/c/7", "repeat_offender_count": 1}}
    (found,) = discover([_job(comment)], WatchConfig(), OPERATOR, known=())
    assert found.spec.policy == {} and found.spec.checkpoint_dir == "/c/7"
    assert "job 7 comment: 'policy.repeat_offender_count' is the operator's only" in caplog.text
    lower = {"trainmedic": {"retry_budget": {"hardware": 1}}}
    (found,) = discover([_job(lower)], WatchConfig(), OPERATOR, known=())
    assert found.spec.policy == {"retry_budget": {"hardware": 1}}


def test_a_stored_policy_that_loosens_is_never_applied(tmp_path: Path) -> None:
    # Registered before this check existed (or written to the database by hand).
    store = Store(sqlite_url(str(tmp_path / "state.db")))
    loose = JobSpec(policy={"max_drain_fraction": 1.0, "retry_budget": {"hardware": 1}})
    store.register_job("7", "slurm", now=time.time(), spec=loose)
    store.register_job(
        "9", "slurm", now=time.time(), spec=JobSpec(policy={"stop_enforcement": True})
    )
    recorder = DecisionRecorder(Config(policy=PolicyConfig()), store)
    assert recorder.policy_for("7") == PolicyConfig()
    assert recorder.policy_for("9") == PolicyConfig(stop_enforcement=True)
    store.close()
