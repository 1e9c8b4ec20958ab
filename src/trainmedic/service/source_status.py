"""Which sources of each job can be read right now: "up", or "unknown" since when and why.

Silence is "unknown", never "gone": a log that vanished or cannot be read, a DCGM endpoint
that does not answer, a scheduler poll that failed make that source *unknown* for the job (the
engine then calls no hang on it). The service loop records every ``SourceStale`` and
``SourceRecovered`` here and declares the sources it polls; the API shows the table per job
(``GET /jobs/{id}``) and as the ``trainmedic_source_up{job_id,source}`` gauge.

Source names are those of the observations: ``log:<path>``, ``checkpoints:<dir>``,
``scheduler`` (per job), ``kernel:<node>`` and ``dcgm:<node>`` (per node, listed under every
job running on that node). Thread-safe: the loop writes while the API reads.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from trainmedic.core.observations import Observation, SourceRecovered, SourceStale

SourceState = Literal["up", "unknown"]


@dataclass(frozen=True, slots=True)
class SourceStatus:
    source: str
    status: SourceState
    since: float  # when it entered this status (or was first polled)
    detail: str = ""  # why it is unknown


class SourceBoard:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._job: dict[str, dict[str, SourceStatus]] = {}  # job -> source -> status
        self._node: dict[str, dict[str, SourceStatus]] = {}  # node -> source -> status
        self._nodes_of: dict[str, tuple[str, ...]] = {}  # job -> its current nodes

    # -- written by the service loop ------------------------------------------------------

    def declare(
        self, source: str, now: float, *, job_id: str | None = None, node: str | None = None
    ) -> None:
        """A source the loop polls: "up" until it reports otherwise."""
        with self._lock:
            table = self._table(job_id, node)
            if table is not None and source not in table:
                table[source] = SourceStatus(source, "up", now)

    def record(self, observations: Iterable[Observation]) -> None:
        """Take in the ``SourceStale`` / ``SourceRecovered`` among ``observations``."""
        with self._lock:
            for obs in observations:
                if not isinstance(obs, SourceStale | SourceRecovered):
                    continue
                table = self._table(obs.job_id, obs.node)
                if table is None:
                    continue
                if isinstance(obs, SourceStale):
                    table[obs.source] = SourceStatus(obs.source, "unknown", obs.time, obs.detail)
                else:
                    table[obs.source] = SourceStatus(obs.source, "up", obs.time)

    def set_nodes(self, job_id: str, nodes: tuple[str, ...]) -> None:
        """The nodes the job runs on now: their node sources are the job's too."""
        with self._lock:
            self._nodes_of[job_id] = nodes

    def forget(self, job_id: str) -> None:
        with self._lock:
            self._job.pop(job_id, None)
            self._nodes_of.pop(job_id, None)

    # -- read by the API --------------------------------------------------------------------

    def of_job(self, job_id: str) -> list[SourceStatus]:
        """The job's own sources, then those of its current nodes, each sorted by name."""
        with self._lock:
            own = sorted(self._job.get(job_id, {}).values(), key=lambda s: s.source)
            nodes = [
                status
                for node in self._nodes_of.get(job_id, ())
                for status in sorted(self._node.get(node, {}).values(), key=lambda s: s.source)
            ]
            return own + nodes

    def jobs(self) -> tuple[str, ...]:
        with self._lock:
            return tuple(sorted(set(self._job) | set(self._nodes_of)))

    def _table(self, job_id: str | None, node: str | None) -> dict[str, SourceStatus] | None:
        if job_id is not None:
            return self._job.setdefault(job_id, {})
        if node is not None:
            return self._node.setdefault(node, {})
        return None
