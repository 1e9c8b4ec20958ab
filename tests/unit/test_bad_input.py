"""One bad record is one bad record: each hostile input below is refused or skipped, counted
in ``trainmedic_bad_input_total{kind}``, and what surrounds it is still read."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from trainmedic.core.badinput import BAD_INPUT, BadInput
from trainmedic.core.logparse.checkpoint import parse_checkpoint
from trainmedic.core.logparse.elastic import ChildFailureTracker
from trainmedic.core.logparse.prefix import parse_prefix
from trainmedic.core.logparse.progress import parse_progress, parse_progress_json
from trainmedic.core.observations import CheckpointSaved, Progress, SourceStale
from trainmedic.core.signatures.matcher import default_matcher
from trainmedic.core.states import JobState
from trainmedic.schedulers.base import JobInfo
from trainmedic.service.config import default_config
from trainmedic.service.config.sections import WatchConfig
from trainmedic.service.discovery import comment_over_limits, discover
from trainmedic.sources.checkpoints import CheckpointWatcher, checkpoint_iteration
from trainmedic.sources.joblog import JobLogSource

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


@pytest.mark.parametrize(
    "line",
    [
        "iter=" + "9" * 5000 + " loss=0.5 step_s=0.1",  # int() raises on 4300+ digits
        f"iter={2**63} loss=0.5 step_s=0.1",  # would overflow the store's INTEGER column
        " iteration " + "9" * 5000 + "/ 100 | lm loss: 1.0 |",
        "step " + "9" * 5000 + " loss 2.0",
        "Epoch 0:  45%|██ | " + "9" * 5000 + "/1000 [00:30<00:36, 15.0it/s]",
        "{'loss': 2.31, 'step': 1e400}",
        "{'loss': 2.31, 'step': nan}",
    ],
)
def test_an_iteration_too_large_is_no_progress_and_is_counted(line: str) -> None:
    before = BAD_INPUT.snapshot()
    assert parse_progress(line) is None
    assert _delta(BadInput.NUMBER, before) <= 1  # nan / inf are not numbers at all
    assert parse_progress_json(json.dumps({"iteration": 2**63})) is None


def test_huge_numbers_elsewhere_in_a_line_are_skipped() -> None:
    assert parse_prefix("[rank" + "9" * 5000 + "]: hello").rank is None
    assert parse_checkpoint("saved checkpoint at iteration " + "9" * 5000) is None
    assert checkpoint_iteration("ckpt_" + "9" * 5000 + ".pt") is None
    tracker = ChildFailureTracker()
    tracker.feed(1, "[0]:")
    tracker.feed(2, "  rank      : " + "9" * 5000 + " (local_rank: " + "9" * 5000 + ")")
    tracker.feed(3, "  exitcode  : -" + "9" * 5000 + " (pid: 1)")
    entry = tracker.close()
    assert entry is not None and (entry.rank, entry.exitcode) == (None, None)


BACKTRACKING = [
    "1%|" * 21_000,  # tqdm's leading lazy label: cubic
    "a: 1%|x| 1/2 [1:2<" * 3_600,
    "checkpoint saved " * 3_800,
    "saved checkpoint " * 3_800,
    "step" + " " * 60_000 + "x",
    "[E0307 05:30:20 " + "1" * 60_000,
    "[Errno 13]" + "." * 60_000,  # catalogue: storage.permission_denied
    "exitcode" + " " * 60_000 + "x",  # catalogue: proc.exit_sigkill
    "KeyError" + "1" * 60_000,  # catalogue: py.exception_line
    "eth0" * 15_000 + " Link is Down",  # catalogue: net.nic_link_down
]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("line", BACKTRACKING, ids=range(len(BACKTRACKING)))
def test_a_backtracking_prone_line_costs_bounded_time(line: str) -> None:
    """Each of these took seconds to hours on 64 KiB lines (the follower's line limit)."""
    started = time.perf_counter()
    parse_progress(line[parse_prefix(line).body_start :])
    parse_checkpoint(line)
    default_matcher().match(line)
    assert time.perf_counter() - started < 2.0


def _special_paths(tmp_path: Path) -> dict[str, Path]:
    fifo = tmp_path / "fifo.log"
    os.mkfifo(fifo)
    real = tmp_path / "real.log"
    real.write_text("iter=1 loss=0.5 step_s=0.1\n")
    link = tmp_path / "link.log"
    link.symlink_to(real)
    return {"fifo": fifo, "device": Path("/dev/zero"), "symlink": link}


@pytest.mark.timeout(30)
@pytest.mark.parametrize("kind", ["fifo", "device", "symlink"])
def test_a_log_path_that_is_not_a_regular_file_is_refused_and_counted(
    tmp_path: Path, kind: str
) -> None:
    path = _special_paths(tmp_path)[kind]
    good = tmp_path / "good.log"
    good.write_text("iter=7 loss=0.5 step_s=0.1\n")
    before = BAD_INPUT.snapshot()
    source = JobLogSource("j1", [path, good], clock=lambda: 100.0)
    first = source.poll()  # a FIFO without writer blocked here; /dev/zero never ended
    stale = [o for o in first if isinstance(o, SourceStale)]
    assert len(stale) == 1 and "not a regular file" in stale[0].detail
    assert [o.iteration for o in first if isinstance(o, Progress)] == [7]
    assert source.poll() == []  # reported once, not at every poll
    assert _delta(BadInput.NOT_REGULAR_FILE, before) == 1
    source.close()


@pytest.mark.timeout(30)
@pytest.mark.parametrize("target", ["/dev/zero", "fifo"])
def test_a_checkpoint_marker_pointing_at_a_device_is_not_read(tmp_path: Path, target: str) -> None:
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "global_step300").mkdir()
    if target == "fifo":
        os.mkfifo(ckpt / "latest")
    else:
        (ckpt / "latest").symlink_to(target)
    before = BAD_INPUT.snapshot()
    (found,) = CheckpointWatcher("j1", ckpt, clock=lambda: 1.0).poll()
    assert isinstance(found, CheckpointSaved) and found.iteration == 300  # from the listing
    assert _delta(BadInput.CHECKPOINT_MARKER, before) == 1
    (ckpt / "latest_checkpointed_iteration.txt").write_text("9" * 5000)
    assert CheckpointWatcher("j2", ckpt, clock=lambda: 1.0).poll()[0].iteration == 300


def test_an_overlong_line_is_cut_counted_and_the_next_line_read(tmp_path: Path) -> None:
    log = tmp_path / "big.log"
    log.write_bytes(b"x" * 200_000 + b"\niter=3 loss=0.5 step_s=0.1\n")
    before = BAD_INPUT.snapshot()
    out = JobLogSource("j1", [log], clock=lambda: 100.0).poll()
    assert [o.iteration for o in out if isinstance(o, Progress)] == [3]
    assert _delta(BadInput.LONG_LINE, before) == 1
