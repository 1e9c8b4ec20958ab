"""Several processes on one SQLite store (service, watchdog, CLI/API): WAL + busy_timeout +
BEGIN IMMEDIATE mean no "database is locked" while they all read and write at once."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from trainmedic.core.model import Action, Advice
from trainmedic.store import AdviceMode, Store, sqlite_url

pytestmark = pytest.mark.slow

WRITER = textwrap.dedent(
    """
    import sys
    from trainmedic.core.model import Action, Advice
    from trainmedic.store import AdviceMode, Store
    store = Store(sys.argv[1])
    name = sys.argv[2]
    for i in range(150):
        store.update_job_progress("shared", progress_at=float(i), iteration=i)
        store.record_hold(name, held_at=float(i), by=name)
        store.release_hold(name, released_at=float(i))
        if i % 10 == 0:
            store.put_advice(name, 0, Advice(Action.RESTART, "b"), mode=AdviceMode.ACTION,
                             now=float(i))
            store.put_advice("common", 0, Advice(Action.RESTART, name), mode=AdviceMode.MONITOR,
                             now=float(i))
    """
)


def test_concurrent_writers_and_a_reader(tmp_path: Path) -> None:
    url = sqlite_url(str(tmp_path / "tm.db"))
    store = Store(url)
    store.register_job("shared", "local", now=0.0)
    store.record_attempt_start("shared", 0, started_at=0.0)
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, url, f"w{i}"],
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(3)
    ]
    reads = 0
    while any(w.poll() is None for w in writers):
        store.list_jobs()
        store.active_advice()
        store.put_advice("reader", 0, Advice(Action.STOP, "r"), mode=AdviceMode.MONITOR, now=1.0)
        reads += 1
    for writer in writers:
        _, err = writer.communicate(timeout=60)
        assert writer.returncode == 0, err
    assert reads > 0
    for name in ("w0", "w1", "w2"):
        assert [a.generation for a in store.list_advice(name)] == list(range(1, 16))
    # Generations stay dense and unique when three processes add to one (job, attempt).
    assert [a.generation for a in store.list_advice("common")] == list(range(1, 46))
    job = store.get_job("shared")
    assert job is not None and job.last_iteration == 149
    assert store.open_holds() == []
