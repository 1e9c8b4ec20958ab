"""Reader processes (``[service] source_workers``): real processes reading real files.

The same lines must become the same observations as when the loop reads them itself; a reader
killed at any point is started again and its jobs' lines are taken exactly once; the service
with readers detects a crash, stores how far it read, and a restarted one does not read the
old lines again."""

from __future__ import annotations

import dataclasses
import os
import signal
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pytest

from trainmedic.core.errors import ConfigError
from trainmedic.core.model import Kind
from trainmedic.core.observations import LogLine, Observation, Progress, ProgressRun
from trainmedic.core.states import JobState
from trainmedic.schedulers.fake import FakeScheduler
from trainmedic.service.config.loader import load_config
from trainmedic.service.config.sections import Config, ServiceConfig
from trainmedic.service.loop import Service
from trainmedic.service.source_pool import SourcePool
from trainmedic.sources.job_readers import JobFiles, JobReaders
from trainmedic.sources.offsets import OffsetBook
from trainmedic.store import JobSpec, Store, sqlite_url

CRASH = "RuntimeError: CUDA error: an illegal memory access was encountered"


def _stamp() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _steps(path: Path, first: int, count: int, rank: int = 0) -> None:
    with path.open("a") as f:
        for i in range(first, first + count):
            f.write(f"{_stamp()} [rank{rank}] node=n{rank} iter={i} loss=0.5 step_s=0.01\n")


def _append(path: Path, text: str) -> None:
    with path.open("a") as f:
        f.write(text)


def _files(tmp_path: Path, jobs: int) -> list[JobFiles]:
    return [
        JobFiles(f"j{k}", tuple(str(tmp_path / f"j{k}.r{r}.log") for r in range(2)))
        for k in range(jobs)
    ]


def _pool(workers: int, files: list[JobFiles]) -> SourcePool:
    pool = SourcePool(workers, UTC)
    pool.reset((), time.time() - 600)
    for f in files:
        pool.watch(f)
    return pool


def _by_job(observations: list[Observation]) -> dict[str, list[Observation]]:
    """Each job's observations in order, the read time (which differs by a few ms between
    two readers of the same line, and is the time of a line that prints none) set aside."""
    out: dict[str, list[Observation]] = {}
    for obs in observations:
        if hasattr(obs, "received"):
            obs = dataclasses.replace(obs, received=0.0)  # type: ignore[call-arg]
        if isinstance(obs, LogLine) and not obs.text[:4].isdigit():
            obs = dataclasses.replace(obs, time=0.0)
        job_id = getattr(obs, "job_id", None)
        assert isinstance(job_id, str)
        out.setdefault(job_id, []).append(obs)
    return out


def _iterations(observations: list[Observation]) -> Counter[tuple[str, int]]:
    seen: Counter[tuple[str, int]] = Counter()
    for obs in observations:
        if isinstance(obs, ProgressRun):
            seen.update((obs.job_id, i) for i in obs.iterations)
        elif isinstance(obs, Progress):
            seen[(obs.job_id, obs.iteration)] += 1
    return seen


def test_readers_turn_lines_into_what_the_loop_would(tmp_path: Path) -> None:
    files = _files(tmp_path, 6)
    book = OffsetBook()
    here = [JobReaders(f, tz=UTC, clock=time.time, book=book) for f in files]
    pool = _pool(2, files)
    try:
        for round_ in range(3):
            for k, f in enumerate(files):
                for r, path in enumerate(map(Path, f.log_paths)):
                    _steps(path, 10 * round_, 5, rank=r)
                    if k % 3 == round_:  # a line no plain run stands for, and a traceback
                        _append(path, f"{_stamp()} [rank{r}] Traceback (most recent call last):\n")
                        _append(path, f'  File "train.py", line 3, in <module>\n{CRASH}\n')
                    _steps(path, 10 * round_ + 5, 3, rank=r)
            local = [obs for reader in here for obs in reader.poll()]
            apart = [obs for answer in pool.start_poll().answers() for obs in answer]
            assert _by_job(apart) == _by_job(local)
            assert sum(_iterations(apart).values()) == 6 * 2 * 8
        for k, job in enumerate(pool._jobs.values()):
            assert job.logs.lines_read == here[k].logs.lines_read
            assert job.logs.progress_lines == here[k].logs.progress_lines
    finally:
        pool.stop()


@pytest.mark.parametrize("when", ["between polls", "during a poll"])
def test_a_killed_reader_is_started_again_and_every_line_is_taken_once(
    tmp_path: Path, when: str
) -> None:
    files = _files(tmp_path, 40)
    pool = _pool(1, files)
    taken: list[Observation] = []
    try:
        for round_ in range(4):
            for f in files:
                for r, path in enumerate(map(Path, f.log_paths)):
                    _steps(path, 100 * round_, 20, rank=r)
            if round_ == 2 and when == "between polls":
                os.kill(pool.pids()[0], signal.SIGKILL)
                time.sleep(0.2)
            polling = pool.start_poll()
            if round_ == 2 and when == "during a poll":
                os.kill(pool.pids()[0], signal.SIGKILL)
            taken.extend(obs for answer in polling.answers() for obs in answer)
        taken.extend(obs for answer in pool.start_poll().answers() for obs in answer)
        seen = _iterations(taken)
        assert set(seen.values()) == {2}  # each iteration once per rank's file: none twice
        assert len(seen) == 40 * 4 * 20  # and none lost
        assert pool.due()  # the positions the new reader resumed from are offered to store
    finally:
        pool.stop()


@pytest.mark.timeout(120)
def test_jobs_joining_while_a_reader_answers_do_not_block_the_loop(tmp_path: Path) -> None:
    """A discovery of thousands of jobs during a cycle whose poll answers are still unread:
    both ends would wait on a full socket buffer if the loop sent the reader more then."""
    files = _files(tmp_path, 60)
    for f in files:
        for r, path in enumerate(map(Path, f.log_paths)):
            _steps(path, 0, 500, rank=r)  # megabytes of answers: the reader blocks sending
    pool = _pool(1, files)
    try:
        polling = pool.start_poll()
        time.sleep(1.0)  # the reader fills the socket and waits for the loop to read
        joining = [
            JobFiles(f"new{k}", (str(tmp_path / ("x" * 150) / f"new{k}.log"),)) for k in range(5000)
        ]
        for f in joining:
            pool.watch(f)  # about a megabyte of messages
        taken = [obs for answer in polling.answers() for obs in answer]
        assert sum(_iterations(taken).values()) == 60 * 2 * 500
        _steps(Path(files[0].log_paths[0]), 500, 1)
        again = [obs for answer in pool.start_poll().answers() for obs in answer]
        assert {getattr(o, "job_id", None) for o in again} >= {"j0"}  # the reader goes on
        assert len(pool._jobs) == 5060
    finally:
        pool.stop()


def _service(tmp_path: Path, sched: FakeScheduler, workers: int) -> tuple[Service, Store]:
    store = Store(sqlite_url(str(tmp_path / "state.db")))
    config = Config(service=ServiceConfig(state_dir=str(tmp_path), source_workers=workers))
    return Service(config, store, sched), store


@pytest.mark.parametrize("workers", [0, 1])
def test_the_service_detects_a_crash_and_resumes_where_it_read(
    tmp_path: Path, workers: int
) -> None:
    """The same with the lines read here (0) and by a reader process (1)."""
    logs = {job: tmp_path / f"{job}.log" for job in ("j1", "j2")}
    sched = FakeScheduler(nodes=["n0"])
    service, store = _service(tmp_path, sched, workers)
    try:
        for job, log in logs.items():
            _steps(log, 1, 10)
            sched.add_job(job, ["n0"])
            service.register(job, JobSpec(log_paths=(str(log),)))
        service.cycle()
        assert service.engine.progress_of("j1")[1] is not None
        _steps(logs["j1"], 11, 5)
        _append(logs["j1"], f"{_stamp()} [rank0] node=n0 {CRASH}\n")
        sched.set_state("j1", JobState.FAILED)
        decisions = []
        for _ in range(20):  # the finding settles for a moment after the job ended
            decisions += service.cycle().decisions
            time.sleep(0.2)
        assert [(d.finding.job_id, d.finding.verdict.kind) for d in decisions] == [
            ("j1", Kind.CRASH)
        ]
        stored = {o.path: o.offset for o in store.follower_offsets()}
        assert stored[str(logs["j2"])] == logs["j2"].stat().st_size
        assert bool(service.reader_processes()[0]) == bool(workers)
    finally:
        service.close()
    # A restart reads on from the stored position: the old lines are not read again.
    _steps(logs["j2"], 11, 2)
    service, store = _service(tmp_path, sched, workers)
    try:
        service.cycle()
        first, latest = service.engine.progress_of("j2")
        assert first is not None and latest is not None
        assert (first.iteration, latest.iteration) == (11, 12)
    finally:
        service.close()


def test_source_workers_out_of_range_are_refused(tmp_path: Path) -> None:
    for bad in (-1, 65):
        with pytest.raises(ValueError, match=r"service\.source_workers must be in 0\.\.64"):
            ServiceConfig(source_workers=bad)
    config = tmp_path / "trainmedic.toml"
    config.write_text('[service]\nsource_workers = "two"\n')
    with pytest.raises(ConfigError, match=r"trainmedic\.toml: service\.source_workers must be"):
        load_config(config)
    config.write_text("[service]\nsource_workers = 2\n")
    assert load_config(config).service.source_workers == 2
