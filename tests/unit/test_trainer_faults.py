"""Fault specs, the injector's firing rules and the trainer's line format (no torch, no ranks)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from trainmedic.core.timestamps import iso_ms
from trainmedic.demo.trainer.fault_injector import FaultInjector, StepEffects
from trainmedic.demo.trainer.faults import Fault, FaultType, parse_faults
from trainmedic.demo.trainer.rank_log import RankLog, StepReport, format_progress


def test_parse_list_and_wrapped_form() -> None:
    text = '[{"id": "f1", "type": "xid79", "node": "node2", "at_iter": 150}]'
    (fault,) = parse_faults(text)
    assert fault == Fault(id="f1", type=FaultType.XID79, node="node2", at_iter=150)
    assert parse_faults(json.dumps({"faults": [{"id": "a", "type": "nan"}]}))[0].type == "nan"
    assert parse_faults("  ") == ()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[{"id": "f", "type": "meteor"}]', "unknown type 'meteor'"),
        ('[{"id": "f", "type": "exit", "nod": "x"}]', "unknown keys ['nod']; valid keys"),
        ('[{"id": "f", "type": "exit", "rank": true}]', "'rank' must be"),
        ('[{"id": "../x", "type": "exit"}]', "'id' must be"),
        ('[{"id": "f", "type": "exit"}, {"id": "f", "type": "nan"}]', "duplicate fault ids"),
        ("{not json", "invalid JSON"),
        ('{"x": 1}', "expected a list"),
    ],
)
def test_parse_rejects_bad_specs_clearly(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        parse_faults(text, "faults.json")


def test_app_error_is_persistent_by_nature() -> None:
    assert not Fault(id="a", type=FaultType.APP_ERROR).one_shot
    assert Fault(id="k", type=FaultType.SIGKILL).one_shot
    assert not Fault(id="k", type=FaultType.SIGKILL, persistent=True).one_shot


def _injector(tmp_path: Path, rank: int, node: str = "node1", attempt: int = 0) -> FaultInjector:
    log = RankLog(rank, node, fd=os.open(os.devnull, os.O_WRONLY))
    return FaultInjector(tmp_path, log, rank, attempt, tmp_path / "kern.log")


def _write(tmp_path: Path, *faults: dict[str, object]) -> None:
    path = tmp_path / "faults.json"
    path.write_text(json.dumps(list(faults)))
    # Same-second rewrites must still be noticed: bump mtime_ns explicitly.
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))


def test_one_shot_fires_once_across_ranks_and_restarts(tmp_path: Path) -> None:
    _write(tmp_path, {"id": "n1", "type": "nan", "at_iter": 3})
    first, second = _injector(tmp_path, 0), _injector(tmp_path, 1)
    for inj in (first, second):
        inj.refresh()
    assert first.step_effects(2) == StepEffects()
    assert first.step_effects(3).nan
    assert not second.step_effects(3).nan  # claimed by rank 0 already
    restarted = _injector(tmp_path, 0, attempt=1)
    restarted.refresh()
    assert not restarted.step_effects(3).nan
    fired = json.loads((tmp_path / "faults.fired" / "n1").read_text())
    assert (fired["rank"], fired["iteration"]) == (0, 3)


def test_persistent_fires_every_attempt_at_exact_iteration(tmp_path: Path) -> None:
    _write(tmp_path, {"id": "p", "type": "nan", "at_iter": 5, "persistent": True})
    for attempt in (0, 1):
        inj = _injector(tmp_path, 0, attempt=attempt)
        inj.refresh()
        assert [inj.step_effects(i).nan for i in (4, 5, 6)] == [False, True, False]
    assert len((tmp_path / "faults.log").read_text().splitlines()) == 2


def test_filters_and_slow_window(tmp_path: Path) -> None:
    _write(
        tmp_path, {"id": "s", "type": "slow", "node": "node2", "slow_s": 0.3, "duration_iters": 2}
    )
    other, slow = _injector(tmp_path, 0, "node1"), _injector(tmp_path, 1, "node2")
    for inj in (other, slow):
        inj.refresh()
    assert other.step_effects(10).slow_s == 0.0
    assert [slow.step_effects(i).slow_s for i in (10, 11, 12)] == [0.3, 0.3, 0.0]


def test_control_file_change_is_picked_up_and_bad_file_ignored(tmp_path: Path) -> None:
    inj = _injector(tmp_path, 0)
    inj.refresh()
    assert inj.faults() == ()
    _write(tmp_path, {"id": "n", "type": "nan"})
    inj.refresh()
    assert inj.step_effects(7).nan  # "now": the next iteration
    (tmp_path / "faults.json").write_text("{broken")
    inj.refresh()
    assert inj.faults() == ()


def test_progress_line_format() -> None:
    step = StepReport(120, 0.5321, 0.0123, 0.0081, 0.0042, 2601.33)
    assert format_progress(step) == (
        "iter=120 loss=0.53210 step_s=0.01230 compute_s=0.00810 wait_s=0.00420 samples_per_s=2601.3"
    )
    assert iso_ms(1795942201.1234) == "2026-11-29T08:50:01.123Z"


def test_multiline_text_is_prefixed_on_every_line(tmp_path: Path) -> None:
    path = tmp_path / "out"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT)
    RankLog(3, "node2", fd=fd).line("Traceback:\n  boom\nValueError: x")
    lines = path.read_text().splitlines()
    assert len(lines) == 3
    assert all(re.match(r"^\S+Z \[rank3\] node=node2 ", line) for line in lines)
