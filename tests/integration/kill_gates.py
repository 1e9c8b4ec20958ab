"""Points of an incident where a test can stop the leading service, then kill it.

A ``trainmedic serve`` process cannot be paused "just after the incident is stored" from the
outside by timing alone: the service claims and applies advice milliseconds later. So each
point is a gate the process itself walks into:

* store writes (PostgreSQL): a ``BEFORE`` trigger on the write calls ``tm_gate_wait(point)``,
  which, while the point is armed, waits for a shared advisory lock the test holds
  exclusively. The write is then in flight, uncommitted: the kill rolls it back.
* Slurm commands: the service runs ``scontrol`` found first on its ``PATH``, a shim that
  logs every command that changes something (the cluster's view of what all services did)
  and, while ``release`` is armed, stops before ``scontrol release`` until its parent dies,
  then exits without running it (the job stays held by a dead service).

``reached()`` tells which armed point a process waits at, so a test kills exactly there.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Sequence
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import Connection

# In incident order: the point's name, what the service has done when it stops there.
POINTS: dict[str, str] = {
    "detect": "finding made, incident not yet stored",
    "claim": "incident and advice stored, advice not yet claimed",
    "drain": "claimed, node drained in Slurm, the drain not yet recorded",
    "hold": "drain recorded, requeue not begun (hold not yet recorded)",
    "release": "job held and requeued by scontrol, not yet released",
    "requeue": "requeue done in Slurm (released), not yet recorded",
    "converge": "every step applied and recorded, not yet marked converged",
}
LOCK_CLASS = 4242  # advisory lock (LOCK_CLASS, index of the point)

_SQL = [
    "CREATE TABLE tm_gate (point text PRIMARY KEY, key int NOT NULL)",
    """
    CREATE FUNCTION tm_gate_wait(p text) RETURNS void AS $$
    DECLARE k int;
    BEGIN
      SELECT key INTO k FROM tm_gate WHERE point = p;
      IF FOUND THEN
        PERFORM pg_advisory_xact_lock_shared(LOCK_CLASS, k);
      END IF;
    END $$ LANGUAGE plpgsql
    """,
    """
    CREATE FUNCTION tm_gate_trigger() RETURNS trigger AS $$
    BEGIN
      -- one table per branch: PL/pgSQL does not promise to short-circuit AND
      IF TG_TABLE_NAME = 'incidents' THEN
        IF NEW.kind <> 'straggler' THEN
          PERFORM tm_gate_wait('detect');
        END IF;
      ELSIF TG_TABLE_NAME = 'holds' THEN
        PERFORM tm_gate_wait('hold');
      ELSIF TG_TABLE_NAME = 'advice' THEN
        IF OLD.status = 'pending' AND NEW.status = 'applying' THEN
          PERFORM tm_gate_wait('claim');
        END IF;
        IF NEW.steps_done::text LIKE '%"drain:%'
           AND OLD.steps_done::text NOT LIKE '%"drain:%' THEN
          PERFORM tm_gate_wait('drain');
        END IF;
        IF NEW.steps_done::text LIKE '%"requeue"%'
           AND OLD.steps_done::text NOT LIKE '%"requeue"%' THEN
          PERFORM tm_gate_wait('requeue');
        END IF;
        IF NEW.status = 'converged' AND OLD.status <> 'converged' THEN
          PERFORM tm_gate_wait('converge');
        END IF;
      END IF;
      RETURN NEW;
    END $$ LANGUAGE plpgsql
    """,
    "CREATE TRIGGER tm_gate_incidents BEFORE INSERT ON incidents "
    "FOR EACH ROW EXECUTE FUNCTION tm_gate_trigger()",
    "CREATE TRIGGER tm_gate_holds BEFORE INSERT ON holds "
    "FOR EACH ROW EXECUTE FUNCTION tm_gate_trigger()",
    "CREATE TRIGGER tm_gate_advice BEFORE UPDATE ON advice "
    "FOR EACH ROW EXECUTE FUNCTION tm_gate_trigger()",
]

SCONTROL_SHIM = """#!/bin/bash
# scontrol as the services under test see it: read-only calls pass through untouched.
if [ "$1" = "-o" ] || [ "$1" = "show" ]; then exec {real} "$@"; fi
if [ "$1" = "release" ] && [ -e {gates}/release ]; then
  echo "$PPID" > {gates}/release.reached
  echo "$PPID blocked: $*" >> {log}
  while kill -0 "$PPID" 2>/dev/null; do sleep 0.05; done
  exit 1
fi
echo "$PPID $*" >> {log}
exec {real} "$@"
"""


class KillGates:
    """The gates of one test: database triggers on ``db_url`` and an ``scontrol`` shim."""

    def __init__(self, db_url: str, workdir: Path) -> None:
        self.dir = workdir / "gates"
        self.bin = workdir / "shim-bin"
        self.commands = workdir / "scontrol.log"  # every changing scontrol call, by parent pid
        for path in (self.dir, self.bin):
            path.mkdir(parents=True, exist_ok=True)
        self.commands.touch()
        real = shutil.which("scontrol")
        assert real, "scontrol not on PATH"
        shim = self.bin / "scontrol"
        shim.write_text(SCONTROL_SHIM.format(real=real, gates=self.dir, log=self.commands))
        shim.chmod(0o755)
        self._engine = sa.create_engine(db_url, isolation_level="AUTOCOMMIT")
        self._conn: Connection = self._engine.connect()  # holds the gates' exclusive locks
        for statement in _SQL:
            self._conn.execute(sa.text(statement.replace("LOCK_CLASS", str(LOCK_CLASS))))

    def arm(self, points: Sequence[str]) -> None:
        for point in points:
            key = list(POINTS).index(point)
            if point == "release":
                (self.dir / "release").touch()
                continue
            self._advisory("pg_advisory_lock", key)
            self._conn.execute(
                sa.text("INSERT INTO tm_gate (point, key) VALUES (:p, :k)"), {"p": point, "k": key}
            )

    def reached(self) -> str | None:
        """The armed point a process waits at now, if any."""
        if (self.dir / "release.reached").exists():
            return "release"
        keys = self._conn.execute(
            sa.text(
                "SELECT objid FROM pg_locks WHERE locktype = 'advisory' AND classid = :c "
                "AND NOT granted"
            ),
            {"c": LOCK_CLASS},
        ).scalars()
        names = list(POINTS)
        found = [names[k] for k in sorted(int(k) for k in keys)]
        return found[0] if found else None

    def open(self, point: str) -> None:
        """Disarm ``point`` and let whoever waits there go on (a dead process's transaction
        then ends, rolled back, as PostgreSQL finds its client gone)."""
        if point == "release":
            (self.dir / "release").unlink(missing_ok=True)
            (self.dir / "release.reached").unlink(missing_ok=True)
            return
        key = list(POINTS).index(point)
        self._conn.execute(sa.text("DELETE FROM tm_gate WHERE point = :p"), {"p": point})
        self._advisory("pg_advisory_unlock", key)

    def _advisory(self, function: str, key: int) -> None:
        self._conn.execute(sa.text(f"SELECT {function}(:c, :k)"), {"c": LOCK_CLASS, "k": key})

    def issued(self, *words: str) -> list[str]:
        """The changing scontrol calls made (not blocked) whose arguments include ``words``."""
        lines = self.commands.read_text().splitlines()
        return [
            line
            for line in lines
            if "blocked:" not in line and all(w in line.split()[1:] for w in words)
        ]

    def close(self) -> None:
        for point in POINTS:
            self.open(point)
        self._conn.close()
        self._engine.dispose()


def wait_reached(gates: KillGates, point: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if gates.reached() == point:
            return
        time.sleep(0.05)
    raise AssertionError(f"no service reached {point!r} ({POINTS[point]}) in {timeout:.0f} s")
