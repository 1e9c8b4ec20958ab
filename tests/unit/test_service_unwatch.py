"""A job that ended is let go: after ``unwatch_after_s`` without advice in progress its files
are closed and its state dropped, and a restarted service does not pick it up again (real
SQLite, real log files, the in-memory scheduler)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from trainmedic.core.states import JobState
from trainmedic.schedulers.fake import FakeScheduler
from trainmedic.service.config.sections import Config, ServiceConfig
from trainmedic.service.loop import Service
from trainmedic.store import JobSpec, Store, sqlite_url


def _open_fds_on(path: Path) -> int:
    fds = Path("/proc/self/fd")
    count = 0
    for fd in fds.iterdir():
        try:
            if os.readlink(fd) == str(path):
                count += 1
        except OSError:
            continue
    return count


def test_an_ended_job_is_unwatched_and_its_files_closed(tmp_path: Path) -> None:
    config = Config(
        service=ServiceConfig(mode="action", state_dir=str(tmp_path), unwatch_after_s=0.5)
    )
    store = Store(sqlite_url(str(tmp_path / "state.db")))
    logs = [tmp_path / f"job{i}.out" for i in range(2)]
    for i, log in enumerate(logs):
        log.write_text("")
        store.register_job(str(i), "fake", now=time.time(), spec=JobSpec(log_paths=(str(log),)))
    sched = FakeScheduler()
    sched.add_job("0", ["node1"])
    sched.add_job("1", ["node2"])
    service = Service(config, store, sched)
    service.cycle()
    assert _open_fds_on(logs[0]) == 1 and set(service.engine.jobs) == {"0", "1"}

    sched.set_state("0", JobState.COMPLETED)
    service.cycle()
    assert "0" in service.engine.jobs  # not before unwatch_after_s
    time.sleep(0.6)
    service.cycle()
    assert set(service.engine.jobs) == {"1"}
    assert _open_fds_on(logs[0]) == 0 and _open_fds_on(logs[1]) == 1
    service.cycle()
    assert set(service.engine.jobs) == {"1"}  # the store's registration does not revive it

    # A job the scheduler no longer knows ends the same way.
    del sched.jobs["1"]
    service.cycle()
    time.sleep(0.6)
    service.cycle()
    assert service.engine.jobs == ()
    assert _open_fds_on(logs[1]) == 0

    store.update_job_progress("0", progress_at=time.time(), iteration=1, state="COMPLETED")
    restarted = Service(config, store, sched)
    assert "0" not in restarted.engine.jobs


def test_an_unwatched_job_leaves_no_state_behind(tmp_path: Path) -> None:
    """A long-running service watching jobs that come and go stays flat: an unwatched job's
    offsets (in memory and in the store) and its source table go with it; a file another
    watched job still follows keeps its offset."""
    config = Config(service=ServiceConfig(state_dir=str(tmp_path), unwatch_after_s=0.01))
    store = Store(sqlite_url(str(tmp_path / "state.db")))
    shared = tmp_path / "shared.log"
    own = tmp_path / "own.log"
    for log in (shared, own):
        log.write_text("step 1\n")
    sched = FakeScheduler()
    service = Service(config, store, sched)
    service.register("a", JobSpec(log_paths=(str(own), str(shared))))
    service.register("b", JobSpec(log_paths=(str(shared),)))
    sched.add_job("a", ["node1"])
    sched.add_job("b", ["node2"])
    service.cycle()
    assert {p.path for p in store.follower_offsets()} == {str(own), str(shared)}

    sched.set_state("a", JobState.COMPLETED)
    service.cycle()
    time.sleep(0.05)
    service.cycle()
    assert set(service.engine.jobs) == {"b"}
    assert service._book.paths() == (str(shared),)  # memory: the book forgot it
    assert {p.path for p in store.follower_offsets()} == {str(shared)}
    assert service.sources.jobs() == ("b",)
    assert "a" not in service.progress_format.running_since  # nor its format watch
