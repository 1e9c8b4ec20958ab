"""One bad record is one bad record: each hostile input below is refused or skipped, counted
in ``trainmedic_bad_input_total{kind}``, and what surrounds it is still read."""

from __future__ import annotations

import json

import pytest

from trainmedic.core.badinput import BAD_INPUT, BadInput
from trainmedic.core.states import JobState
from trainmedic.schedulers.base import JobInfo
from trainmedic.service.config import default_config
from trainmedic.service.config.sections import WatchConfig
from trainmedic.service.discovery import comment_over_limits, discover

POLICY = default_config().policy


def _delta(kind: BadInput, before: dict[BadInput, int]) -> int:
    return BAD_INPUT.snapshot()[kind] - before[kind]


def _job(job_id: str, comment: str) -> JobInfo:
    return JobInfo(job_id, JobState.RUNNING, nodes=("node1",), comment=comment, partition="gpu")


@pytest.mark.parametrize(
    "comment",
    [
        '{"trainmedic": ' + "[" * 200_000 + "]" * 200_000 + "}",  # RecursionError in json
        '{"trainmedic": {"checkpoint_dir": "' + "x" * 100_000 + '"}}',
        '{"trainmedic": {"a": [[[[[[[[[1]]]]]]]]]}}',
    ],
)
def test_a_hostile_comment_is_ignored_counted_and_discovery_goes_on(comment: str) -> None:
    before = BAD_INPUT.snapshot()
    good = '{"trainmedic": {"checkpoint_dir": "/ckpt/2"}}'
    jobs = [_job("1", comment), _job("2", good)]
    found = discover(jobs, WatchConfig(partitions=("gpu",)), POLICY, known=())
    assert [(f.job_id, f.why, f.spec.checkpoint_dir) for f in found] == [
        ("1", "matches [watch]", ""),  # the comment is ignored, the config still applies
        ("2", "opted in through its comment", "/ckpt/2"),
    ]
    assert _delta(BadInput.JOB_COMMENT, before) == 1


def test_comment_limits_ignore_brackets_inside_strings() -> None:
    policy = {"trainmedic": {"checkpoint_dir": "/ckpt/" + "[{" * 20 + 'x"\\'}}
    assert comment_over_limits(json.dumps(policy)) is None
