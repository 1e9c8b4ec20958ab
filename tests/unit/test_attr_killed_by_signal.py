"""A rank killed by SIGKILL with no error line: the OOM killer is the usual sender, so without
other evidence the verdict is that guess; where the kernel logs of the job's nodes were read
and hold no OOM record, it says what is known instead (killed by signal 9 from outside the
job, sender unknown), invents no cause, and is never stopped or drained on."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

from test_policy_decide import ctx

from trainmedic.core.detect.config import SMALL_JOB
from trainmedic.core.engine.engine import Engine
from trainmedic.core.logparse.scan import is_kernel_log_name
from trainmedic.core.model import Action, Category, EvidenceSource
from trainmedic.core.observations import JobStatus, LogLine
from trainmedic.core.policy import decide
from trainmedic.core.states import JobState
from trainmedic.offline.analyze import analyze_path

NODES = ("fw5", "fw6")
TABLE = [
    "[rank0]: RuntimeError: [../gloo/transport/tcp/pair.cc:553] Connection closed by peer "
    "[127.0.0.1]:4016",
    "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
    "============================================================",
    "train.py FAILED",
    "------------------------------------------------------------",
    "Failures:",
    "  <NO_OTHER_FAILURES>",
    "------------------------------------------------------------",
    "Root Cause (first observed failure):",
    "[0]:",
    "  time      : 2026-12-01_14:50:12",
    "  host      : fw6",
    "  rank      : 3 (local_rank: 1)",
    "  exitcode  : -9 (pid: 30048)",
    "  error_file: <N/A>",
    "  traceback : Signal 9 (SIGKILL) received by PID 30048",
    "============================================================",
]
OOM = "Dec  1 14:50:12 fw6 kernel: Out of memory: Killed process 30048 (python) total-vm:9GB"


def job_dir(tmp_path: Path, kernel: dict[str, str]) -> Path:
    (tmp_path / "job.err").write_text("\n".join(TABLE) + "\n")
    for node, text in kernel.items():
        (tmp_path / node).mkdir()
        (tmp_path / node / "kern.log").write_text(text)
    return tmp_path


def test_without_a_kernel_log_the_sigkill_is_the_oom_guess(tmp_path: Path) -> None:
    verdict = analyze_path(job_dir(tmp_path, {})).verdict
    assert verdict.category is Category.APPLICATION and verdict.confidence < 0.5
    assert "most likely the host OOM killer" in verdict.basis


def test_kernel_logs_without_an_oom_record_say_what_is_known(tmp_path: Path) -> None:
    verdict = analyze_path(job_dir(tmp_path, {"fw5": "", "fw6": ""})).verdict
    assert verdict.category is Category.UNKNOWN and verdict.confidence < 0.5, verdict.basis
    assert "killed by signal 9 (SIGKILL) from outside the job, sender unknown" in verdict.basis
    assert "no OOM record in the kernel log of fw5, fw6" in verdict.basis
    assert "OOM killer" not in verdict.basis
    assert 3 in verdict.implicated.ranks, verdict.implicated
    # Restarted in place: never stopped on the verdict itself, never drained.
    advice = decide(verdict, ctx(current_nodes=NODES))
    assert advice.action is Action.RESTART and advice.drain_nodes == (), advice.basis
    again = decide(verdict, ctx(current_nodes=NODES, node_history={"fw6": 3}))
    assert again.action is not Action.STOP and again.drain_nodes == (), again.basis


def test_an_oom_record_in_the_kernel_log_is_the_cause(tmp_path: Path) -> None:
    verdict = analyze_path(job_dir(tmp_path, {"fw5": "", "fw6": OOM + "\n"})).verdict
    assert verdict.category is Category.APPLICATION, verdict.basis
    assert verdict.root_cause is not None and "Out of memory" in verdict.root_cause.text


def test_the_live_engine_says_the_same_when_it_follows_the_nodes_kernel_logs() -> None:
    def verdict(kernel_logs: frozenset[str]) -> tuple[Category, str]:
        engine = Engine(SMALL_JOB, settle_s=0.0, max_settle_s=0.0)
        engine.kernel_log_nodes = kernel_logs
        engine.watch("j")
        engine.observe(JobStatus(0.0, "j", JobState.RUNNING, NODES, 0), 0.0)
        for n, text in enumerate(TABLE, 1):
            line = LogLine(1.0, text, EvidenceSource.APP_LOG, "job.err", n, job_id="j")
            engine.observe(line, 1.0)
        engine.observe(JobStatus(2.0, "j", JobState.FAILED, NODES, 0, exit_code=1), 2.0)
        (finding,) = engine.evaluate(10.0)
        return finding.verdict.category, finding.verdict.basis

    category, basis = verdict(frozenset(NODES))
    assert category is Category.UNKNOWN and "sender unknown" in basis
    category, basis = verdict(frozenset({"fw9"}))  # not the attempt's nodes
    assert category is Category.APPLICATION and "OOM killer" in basis


def test_kernel_log_names() -> None:
    for name in ("n1/kern.log", "n1/kern.log.1", "n1/kern.log.2.gz", "n1/dmesg", "messages"):
        assert is_kernel_log_name(name), name
    for name in ("job.err", "kern.log.bak", "train.log", "n1/stdout"):
        assert not is_kernel_log_name(name), name


def test_facts_default_to_no_kernel_log() -> None:
    from trainmedic.core.attribute.facts import JobFacts

    assert JobFacts().kernel_logs == frozenset()
    assert dataclasses.replace(JobFacts(), kernel_logs=frozenset({"n1"})).kernel_logs


XID_OLD = "2026-12-01T14:00:00.000000+00:00 fw6 kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=1, "
XID_OLD += "GPU has fallen off the bus."


def test_since_scopes_a_nodes_kernel_log_to_the_attempt_as_the_live_engine_does(
    tmp_path: Path,
) -> None:
    """The lab's shared nodes: an Xid another job's fault wrote into fw6's kernel log an hour
    before this attempt started is no evidence against it (live reads a node's kernel log
    from the attempt's start); ``analyze --since`` scopes it alike."""
    job = job_dir(tmp_path, {"fw5": "", "fw6": XID_OLD + "\n"})
    unscoped = analyze_path(job).verdict
    assert unscoped.category is Category.GPU_HARDWARE  # without the attempt's start
    started = datetime(2026, 12, 1, 14, 50, tzinfo=UTC).timestamp()
    scoped = analyze_path(job, since=started).verdict
    assert scoped.category is Category.UNKNOWN and "sender unknown" in scoped.basis
    near = analyze_path(job, since=datetime(2026, 12, 1, 14, 0, 5, tzinfo=UTC).timestamp())
    assert near.verdict.category is Category.GPU_HARDWARE  # within 10 s before the start


def test_the_since_option_takes_a_zoned_time_or_epoch_seconds(tmp_path: Path) -> None:
    job = job_dir(tmp_path, {"fw5": "", "fw6": XID_OLD + "\n"})
    for since, code in (("2026-12-01T14:50:00+00:00", 0), ("1796136600", 0), ("14:50", 2)):
        done = subprocess.run(
            [sys.executable, "-m", "trainmedic.cli.main", "analyze", str(job), "--since", since],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == code, done.stderr
    naive = subprocess.run(
        [
            sys.executable,
            "-m",
            "trainmedic.cli.main",
            "analyze",
            str(job),
            "--since",
            "2026-12-01T14:50:00",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert naive.returncode == 2 and "has no zone" in naive.stderr
