"""JobLogSource, KernelLogSource and CheckpointWatcher on real files."""

from __future__ import annotations

import json
import os
from pathlib import Path

from trainmedic.core.model import EvidenceSource
from trainmedic.core.observations import (
    CheckpointSaved,
    LogLine,
    Progress,
    SourceRecovered,
    SourceStale,
)
from trainmedic.sources.checkpoints import CheckpointWatcher, checkpoint_iteration
from trainmedic.sources.joblog import JobLogSource
from trainmedic.sources.kernel import KernelLogSource

NOW = 1_795_942_300.0  # 2026-11-29T08:51:40Z, 99 s after the lines below


class FakeClock:
    def __init__(self, t: float = NOW) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def trainer_line(text: str, rank: int = 1, node: str = "node2") -> str:
    return f"2026-11-29T08:50:01.123Z [rank{rank}] node={node} {text}\n"


def test_job_log_turns_lines_into_observations(tmp_path: Path) -> None:
    log = tmp_path / "job.out"
    log.write_text(
        trainer_line(
            "iter=120 loss=0.53210 step_s=0.01230 compute_s=0.00810 wait_s=0.00420 "
            "samples_per_s=2601.3"
        )
        + trainer_line("checkpoint begin iter=120", rank=0, node="node1")
        + trainer_line("checkpoint saved iter=120 path=/r/ckpt_00000120.pt", rank=0, node="node1")
        + trainer_line("RuntimeError: Connection closed by peer [127.0.0.1]:14772")
    )
    source = JobLogSource("j1", [log], clock=FakeClock())
    progress, progress_line, begin, begin_line, saved, saved_line, error = source.poll()
    assert isinstance(progress, Progress)
    # every line reaches the engine's scan: its facts count the steps, as analyze's do
    assert isinstance(progress_line, LogLine) and progress_line.line_no == 1
    assert (progress.job_id, progress.iteration, progress.rank, progress.node) == (
        "j1",
        120,
        1,
        "node2",
    )
    assert (progress.step_time, progress.compute_time, progress.wait_time) == (
        0.0123,
        0.0081,
        0.0042,
    )
    assert progress.loss == 0.5321 and progress.time == 1795942201.123
    assert isinstance(begin, CheckpointSaved) and begin.in_progress and begin.iteration == 120
    assert isinstance(saved, CheckpointSaved) and not saved.in_progress
    assert saved.path == "/r/ckpt_00000120.pt"
    assert isinstance(begin_line, LogLine) and isinstance(saved_line, LogLine)
    assert isinstance(error, LogLine) and error.source is EvidenceSource.APP_LOG
    assert (error.job_id, error.rank, error.node, error.line_no) == ("j1", 1, "node2", 4)
    assert source.poll() == []


def test_loose_progress_formats_also_reach_the_matcher(tmp_path: Path) -> None:
    log = tmp_path / "megatron.log"
    log.write_text(
        " iteration      100/  500000 | consumed samples: 800 | elapsed time per iteration (ms):"
        " 1234.5 | lm loss: 5.4E+00 |\n"
    )
    progress, line = JobLogSource("j1", [log], clock=FakeClock()).poll()
    assert isinstance(progress, Progress) and progress.iteration == 100
    assert isinstance(line, LogLine)


def test_jsonl_progress_files_found_in_a_directory(tmp_path: Path) -> None:
    progress_dir = tmp_path / "progress"
    source = JobLogSource("j1", progress_dirs=[progress_dir], clock=FakeClock())
    assert source.poll() == []
    progress_dir.mkdir()
    record = {
        "time": NOW - 1,
        "rank": 3,
        "node": "node2",
        "iteration": 7,
        "loss": None,
        "step_time": 0.01,
        "compute_time": 0.006,
        "wait_time": 0.003,
    }
    (progress_dir / "node2-rank3.jsonl").write_text(json.dumps(record) + "\nnot json\n")
    (obs,) = source.poll()
    assert isinstance(obs, Progress)
    assert (obs.iteration, obs.rank, obs.node, obs.time, obs.loss) == (7, 3, "node2", NOW - 1, None)


def test_missing_log_is_stale_once(tmp_path: Path) -> None:
    source = JobLogSource("j1", [tmp_path / "nope.log"], clock=FakeClock())
    (stale,) = source.poll()
    assert isinstance(stale, SourceStale) and stale.job_id == "j1" and "nope.log" in stale.detail
    assert source.poll() == []


def test_kernel_log_lines_are_system_evidence_for_the_node(tmp_path: Path) -> None:
    kern = tmp_path / "kern.log"
    kern.write_text("Nov 29 08:00:00 node2 kernel: old line\n")
    source = KernelLogSource("node2", kern, from_end=True, clock=FakeClock())
    assert source.poll() == []
    with kern.open("a") as handle:
        handle.write("NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.\n")
    (line,) = source.poll()
    assert isinstance(line, LogLine) and line.source is EvidenceSource.KERNEL_LOG
    assert line.node == "node2" and line.job_id is None and line.time == NOW
    assert line.source.is_system()


def test_checkpoint_names() -> None:
    assert checkpoint_iteration("ckpt_00000120.pt") == 120
    assert checkpoint_iteration("ckpt_000120.pt") == 120
    assert checkpoint_iteration("iter_0000120") == 120
    assert checkpoint_iteration("checkpoint-500") == 500
    assert checkpoint_iteration("global_step500") == 500
    assert checkpoint_iteration("epoch=0-step=500.ckpt") == 500
    for temp in ("ckpt_00000130.pt.tmp", ".ckpt_00000130.pt", "tmpab12", "README"):
        assert checkpoint_iteration(temp) is None


def test_checkpoint_watcher_reports_each_new_checkpoint(tmp_path: Path) -> None:
    ckpt = tmp_path / "checkpoints"
    watcher = CheckpointWatcher("j1", ckpt, clock=FakeClock())
    (stale,) = watcher.poll()
    assert isinstance(stale, SourceStale)
    assert watcher.poll() == []
    ckpt.mkdir()
    (back,) = watcher.poll()  # readable again, still no checkpoint
    assert isinstance(back, SourceRecovered) and back.source == stale.source
    assert watcher.poll() == []
    (ckpt / "ckpt_00000100.pt").write_bytes(b"x")
    (ckpt / "ckpt_00000200.pt.tmp").write_bytes(b"x")
    (saved,) = watcher.poll()
    assert isinstance(saved, CheckpointSaved)
    assert (saved.iteration, saved.job_id, saved.in_progress) == (100, "j1", False)
    assert saved.time == os.stat(ckpt / "ckpt_00000100.pt").st_mtime
    assert watcher.poll() == []
    os.replace(ckpt / "ckpt_00000200.pt.tmp", ckpt / "ckpt_00000200.pt")
    (saved,) = watcher.poll()
    assert isinstance(saved, CheckpointSaved) and saved.iteration == 200
    assert saved.path.endswith("ckpt_00000200.pt")


def test_checkpoint_sidecar_is_authoritative(tmp_path: Path) -> None:
    (tmp_path / "iter_0000100").mkdir()
    (tmp_path / "iter_0000200").mkdir()  # being written: the tracker still says 100
    (tmp_path / "latest_checkpointed_iteration.txt").write_text("100")
    watcher = CheckpointWatcher("j1", tmp_path, clock=FakeClock())
    (saved,) = watcher.poll()
    assert isinstance(saved, CheckpointSaved) and saved.iteration == 100
    assert saved.path.endswith("iter_0000100")
    (tmp_path / "latest_checkpointed_iteration.txt").write_text("200")
    os.utime(tmp_path / "latest_checkpointed_iteration.txt", ns=(1, 10**18))
    (saved,) = watcher.poll()
    assert isinstance(saved, CheckpointSaved) and saved.iteration == 200


def test_resume_config_and_error_lines_are_not_progress(tmp_path: Path) -> None:
    log = tmp_path / "job.out"
    stamp = "ts=2026-03-07T10:11:12.123Z rank=0"
    log.write_text(
        f"{stamp} event=config train_iters=1000 ckpt_every=50\n"
        f"{stamp} event=resume ckpt=/run/ckpt/model_iter000850.pt iter=850\n"
        f"{stamp} event=step iter=851 loss=0.2310 dt_ms=12.4\n"
        f"{stamp} event=ckpt iter=900 path=/run/ckpt/model_iter000900.pt\n"
        "[rank1]: RuntimeError: loss scaler state is inconsistent at iteration 880\n"
    )
    observed = JobLogSource("j1", [log], clock=FakeClock()).poll()
    steps = [o.iteration for o in observed if isinstance(o, Progress)]
    saved = [o.iteration for o in observed if isinstance(o, CheckpointSaved)]
    assert steps == [851] and saved == [900]
    assert sum(isinstance(o, LogLine) for o in observed) == 5
