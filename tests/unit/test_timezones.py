"""Zone-less printed times (Python logging prints local time) under ``TZ`` west and east of UTC.

Liveness uses the time a line was read, so a job in any zone is neither called hung at once
(stamps that look hours old) nor missed (stamps that look hours ahead); printed times are read
in the machine's zone (``[detect] log_timezone = "local"``) and date the reports correctly.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from trainmedic.core.detect import DetectorConfig, JobDetectorState
from trainmedic.core.errors import ConfigError
from trainmedic.core.logparse.prefix import parse_prefix
from trainmedic.core.observations import JobStatus, Progress
from trainmedic.core.states import JobState
from trainmedic.service.config import load_config
from trainmedic.sources.joblog import JobLogSource
from trainmedic.sources.lines import LocalZone, resolve_timezone

JOB = "hf"
ASCTIME = "%Y-%m-%d %H:%M:%S"  # logging.Formatter's default asctime, in local time


@pytest.fixture(params=["America/Los_Angeles", "Asia/Tokyo"])
def zone(request: pytest.FixtureRequest) -> Iterator[str]:
    before = os.environ.get("TZ")
    os.environ["TZ"] = request.param
    time.tzset()
    try:
        yield str(request.param)
    finally:
        if before is None:
            del os.environ["TZ"]
        else:
            os.environ["TZ"] = before
        time.tzset()


def logging_line(unix: float, message: str) -> str:
    """What ``logging.basicConfig(format="%(asctime)s - %(levelname)s - %(name)s - ...")``
    prints: local wall-clock time, no zone."""
    millis = int(unix * 1000) % 1000
    return f"{time.strftime(ASCTIME, time.localtime(unix))},{millis:03d} - INFO - train - {message}"


def test_a_zone_less_stamp_is_local_time(zone: str) -> None:
    now = 1_767_225_600.25  # 2026-01-01 00:00:00.25 UTC: a date on which both zones differ
    line = logging_line(now, "step 5 loss 1.0")
    assert parse_prefix(line, tz=LocalZone()).timestamp == pytest.approx(now, abs=1e-3)
    offset = time.localtime(now).tm_gmtoff
    assert offset != 0
    assert parse_prefix(line).timestamp == pytest.approx(now + offset, abs=1e-3), "as UTC"
    assert parse_prefix(line, tz=resolve_timezone(zone)).timestamp == pytest.approx(now, abs=1e-3)


def test_no_false_hang_and_no_missed_hang_in_any_zone(zone: str, tmp_path: Path) -> None:
    clock = [time.time()]
    log = tmp_path / "train.log"
    log.write_text("")
    source = JobLogSource(JOB, [log], clock=lambda: clock[0], tz=resolve_timezone("local"))
    config = DetectorConfig()  # real-job defaults
    state = JobDetectorState(JOB, config)
    state.observe(JobStatus(clock[0], JOB, JobState.RUNNING, ("n1",)))
    reports: list[Progress] = []
    for n in range(1, 7):  # HF-like: one line per logging interval, 60 s apart
        clock[0] += 60.0
        with log.open("a") as out:
            out.write(logging_line(clock[0], f"step {500 * n} loss 1.5") + "\n")
        for obs in source.poll():
            state.observe(obs)
            if isinstance(obs, Progress):
                reports.append(obs)
        assert state.check(clock[0] + 1.0) == (), f"false hang in {zone}"
    assert [p.iteration for p in reports] == [500, 1000, 1500, 2000, 2500, 3000]
    last = reports[-1]
    assert last.received == clock[0]
    assert last.time == pytest.approx(clock[0], abs=1.0), "the printed time dates the report"
    threshold = config.hang_k * 60.0 + config.hang_margin_s
    assert state.check(clock[0] + threshold - 1.0) == ()
    (hang,) = state.check(clock[0] + threshold + 1.0)  # not missed
    assert hang.since == pytest.approx(clock[0], abs=1.0)


def test_a_utc_log_on_a_machine_in_another_zone(zone: str) -> None:
    now = 1_767_225_600.0
    line = time.strftime(ASCTIME, time.gmtime(now)) + ",000 INFO step 1"
    assert parse_prefix(line, tz=resolve_timezone("UTC")).timestamp == now
    zoned = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(now)) + " step 1"
    assert parse_prefix(zoned, tz=LocalZone()).timestamp == now, "a printed zone wins"


def test_log_timezone_is_checked_when_the_config_is_loaded(tmp_path: Path) -> None:
    good = tmp_path / "good.toml"
    good.write_text('[detect]\nlog_timezone = "Europe/Paris"\n')
    assert load_config(good, {"HOME": str(tmp_path)}).detect.log_timezone == "Europe/Paris"
    bad = tmp_path / "bad.toml"
    bad.write_text('[detect]\nlog_timezone = "Mars/Olympus_Mons"\n')
    with pytest.raises(ConfigError, match=r"detect\.log_timezone 'Mars/Olympus_Mons'") as info:
        load_config(bad, {"HOME": str(tmp_path)})
    assert "\n" not in str(info.value)
