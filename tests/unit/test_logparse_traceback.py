"""Tracebacks as one unit, and torchrun's ChildFailedError table."""

from __future__ import annotations

from trainmedic.core.logparse.elastic import ChildFailureTracker
from trainmedic.core.logparse.traceback import group_tracebacks

CHECKPOINT_TB = """\
Traceback (most recent call last):
  File "/work/train.py", line 90, in <module>
    main()
  File "/work/train.py", line 61, in main
    torch.save(state, path)
  File "/venv/lib/python3.11/site-packages/torch/serialization.py", line 628, in save
    with _open_zipfile_writer(f) as opened_zipfile:
RuntimeError: File /ckpt/step_900.pt cannot be opened.
after"""


def test_traceback_unit_and_frames() -> None:
    (unit,) = group_tracebacks(CHECKPOINT_TB.splitlines(), first_line=10)
    assert (unit.start_line, unit.exception_line) == (10, 17)
    assert unit.exception_type == "RuntimeError"
    assert unit.message == "File /ckpt/step_900.pt cannot be opened."
    assert "torch.save(state, path)" in unit.frames_text()
    assert any("serialization.py:628 in save" in f for f in unit.frames)


def test_chained_tracebacks_are_separate_units() -> None:
    text = [
        "Traceback (most recent call last):",
        '  File "a.py", line 1, in f',
        "KeyError: 'lr'",
        "",
        "During handling of the above exception, another exception occurred:",
        "",
        "Traceback (most recent call last):",
        '  File "a.py", line 3, in g',
        "ValueError: bad config",
    ]
    units = group_tracebacks(text)
    assert [(u.exception_type, u.exception_line) for u in units] == [
        ("KeyError", 3),
        ("ValueError", 9),
    ]


def test_interleaved_foreign_lines_and_dotted_types() -> None:
    text = [
        "Traceback (most recent call last):",
        "NCCL INFO comm 0x1 rank 3 nranks 8",
        '  File "t.py", line 5, in step',
        "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
    ]
    (unit,) = group_tracebacks(text)
    assert unit.exception_type == "torch.cuda.OutOfMemoryError"


def test_unterminated_traceback_gives_nothing() -> None:
    assert group_tracebacks(["Traceback (most recent call last):", '  File "x", line 1']) == []


TABLE = """\
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
train.py FAILED
------------------------------------------------------------
Failures:
[1]:
  time      : 2024-05-02_10:00:07
  host      : node-b
  rank      : 3 (local_rank: 1)
  exitcode  : 1 (pid: 812)
  error_file: <N/A>
  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2024-05-02_10:00:05
  host      : node-a
  rank      : 0 (local_rank: 0)
  exitcode  : -15 (pid: 811)
  error_file: <N/A>
  traceback : Signal 15 (SIGTERM) received by PID 811
============================================================"""


def test_child_failed_table() -> None:
    tracker = ChildFailureTracker()
    found = [f for n, line in enumerate(TABLE.splitlines(), 1) if (f := tracker.feed(n, line))]
    tail = tracker.close()
    if tail:
        found.append(tail)
    assert [(f.rank, f.host, f.exitcode, f.root_cause_section) for f in found] == [
        (3, "node-b", 1, False),
        (0, "node-a", -15, True),
    ]
    assert found[1].sigterm_victim and not found[0].sigterm_victim
    assert found[0].local_rank == 1


def test_agent_failed_line() -> None:
    line = (
        "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9) "
        "local_rank: 0 (pid: 2410412) of binary: /usr/bin/python"
    )
    f = ChildFailureTracker().feed(4, line)
    assert f is not None and (f.exitcode, f.local_rank, f.line) == (-9, 0, 4)
