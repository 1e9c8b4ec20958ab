"""Configuration smells are suspects, never failures by themselves: ``analyze`` lists them beside
a healthy verdict, and the live engine names the first one (a guess, restarted) only for a
failure its detector saw that no failure line explains.

Before, a hang of a job whose NCCL had picked docker0 for its sockets was "unknown" with no
pointer, and ``analyze`` said nothing of a 64 KB locked-memory limit or a 64 MB /dev/shm."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from live_job import T0, LiveJob, stamp

from trainmedic.cli.main import main
from trainmedic.core.attribute.smells import SMELL_CONFIDENCE, smells
from trainmedic.core.detect.anomaly import Anomaly, Trigger
from trainmedic.core.engine.signals import verdict_for_anomaly
from trainmedic.core.model import NO_FAILURE, Action, Category, Kind
from trainmedic.core.policy.context import PolicyContext
from trainmedic.core.policy.decide import decide
from trainmedic.offline.analyze import analyze_path

DOCKER0 = "gpu-a:410:455 [0] NCCL INFO NET/Socket : Using [0]docker0:172.17.0.1<0>"
SMELLY = [
    ("max locked memory       (kbytes, -l) 64", "smell.memlock_limit_small"),
    (
        "WARNING services.py:1996 -- WARNING: The object store is using /tmp instead of /dev/shm "
        "because /dev/shm has only 67108864 bytes available. This will harm performance!",
        "smell.shm_small",
    ),
    ("shm              64M     0   64M   0% /dev/shm", "smell.shm_small"),
    (DOCKER0, "smell.nccl_virtual_interface"),
    (
        "w0:12:40 [0] NCCL INFO NET/Socket : Using [0]eth0:10.1.0.5<0> [1]virbr0:192.168.122.1<0>",
        "smell.nccl_virtual_interface",
    ),
]
CLEAN = [
    "max locked memory       (kbytes, -l) unlimited",
    "shm              32G  1.2G   31G   4% /dev/shm",
    "node2:91:140 [1] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.2<0>",
    "gpu-a:410:455 [0] NCCL INFO Bootstrap : Using eth0:172.17.0.2<0>",
    "docker run --shm-size=16g --ulimit memlock=-1 trainer:latest",
]
STEPS = "".join(f"step {i} loss {2.0 - i / 100:.2f}\n" for i in range(1, 40))


@pytest.mark.parametrize(("line", "signature"), SMELLY)
def test_a_smell_is_a_suspect_of_a_healthy_verdict(
    tmp_path: Path, line: str, signature: str
) -> None:
    path = tmp_path / "job.log"
    path.write_text(line + "\n" + STEPS + "Training completed.\n")
    result = analyze_path(path)
    assert not result.verdict.failure
    assert [e.signature for e in result.suspects] == [signature]


@pytest.mark.parametrize("line", CLEAN)
def test_a_sound_setting_is_no_suspect(tmp_path: Path, line: str) -> None:
    path = tmp_path / "job.log"
    path.write_text(line + "\n" + STEPS)
    assert analyze_path(path).suspects == ()


def test_analyze_prints_the_suspects_in_text_and_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "job.log"
    path.write_text(DOCKER0 + "\n" + STEPS)
    assert main(["analyze", str(path)]) == 0
    assert "worth checking: smell.nccl_virtual_interface" in capsys.readouterr().out
    assert main(["analyze", "--json", str(path)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["failure"] is False
    assert [s["signature"] for s in report["suspects"]] == ["smell.nccl_virtual_interface"]


def _hang(category: Category | None = None) -> Anomaly:
    return Anomaly(
        kind=Kind.HANG,
        job_id="j",
        detected_at=100.0,
        since=40.0,
        trigger=Trigger.NO_PROGRESS,
        basis="no progress for 60 s",
        ranks=(0,),
        category=category,
    )


def test_a_detected_hang_no_line_explains_is_put_on_the_smell_as_a_guess(tmp_path: Path) -> None:
    path = tmp_path / "job.log"
    path.write_text(DOCKER0 + "\n" + STEPS)
    suspects = analyze_path(path).suspects
    verdict = verdict_for_anomaly(_hang(), NO_FAILURE, suspects)
    assert (verdict.kind, verdict.category) == (Kind.HANG, Category.SYSTEM_SOFTWARE)
    assert verdict.confidence == SMELL_CONFIDENCE < 0.5
    assert "configuration smell" in verdict.basis and verdict.implicated.nodes == ()
    advice = decide(verdict, PolicyContext.offline("j"))
    assert advice.action is Action.RESTART and not advice.drain_nodes
    # no smell: unknown as before; the detector's own category wins over a smell
    assert verdict_for_anomaly(_hang(), NO_FAILURE, ()).category is Category.UNKNOWN
    nan = verdict_for_anomaly(_hang(Category.APPLICATION), NO_FAILURE, suspects)
    assert nan.category is Category.APPLICATION


def test_smells_are_listed_once_in_their_order(tmp_path: Path) -> None:
    path = tmp_path / "job.log"
    path.write_text("\n".join([DOCKER0, SMELLY[0][0], DOCKER0]) + "\n")
    found = smells(analyze_path(path).suspects)
    assert [e.signature for e in found] == [
        "smell.nccl_virtual_interface",
        "smell.memlock_limit_small",
    ]


def test_the_live_engine_names_the_smell_of_a_job_that_hangs(tmp_path: Path) -> None:
    """Through the service's path (JobLogSource on a real file, the engine): a job whose NCCL
    chose docker0 trains, then stops making progress with no error line: the hang is put on
    the interface, as a guess."""
    job = LiveJob(tmp_path / "train.log", f"{stamp(T0)} {DOCKER0}\n")
    job.train(lambda now, i: f"{stamp(now)} step {i} loss {2.0 - i / 100:.2f}\n")
    engine, now = job.engine, job.now
    findings = engine.evaluate(now + 30.0) or engine.evaluate(now + 31.0)
    assert [f.verdict.kind for f in findings] == [Kind.HANG]
    verdict = findings[0].verdict
    assert verdict.category is Category.SYSTEM_SOFTWARE, verdict.basis
    assert verdict.confidence == SMELL_CONFIDENCE
    assert verdict.root_cause is not None
    assert verdict.root_cause.signature == "smell.nccl_virtual_interface"
