"""What the demo reads to time what happened: the store the service writes (incidents,
advice, attempts, progress) and the trainer's own record of when it fired a fault.

The demo never asks the service; it waits until the store shows what it expects, so the
times it reports are the ones a user of the store or the API would see.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from trainmedic.core.errors import TrainmedicError
from trainmedic.core.model import Kind
from trainmedic.demo.report import Timeline
from trainmedic.demo.scenarios import Scenario
from trainmedic.store import AdviceRecord, IncidentRecord, Store


class DemoError(TrainmedicError):
    """The demo could not go on (a fault was not detected in time, the job did not start)."""


class DemoObserver:
    """Waits on and reads the store for one demo job's run directory.

    ``unexpected`` collects incidents no injected fault explains (the runner's list)."""

    def __init__(
        self,
        store: Store,
        timeline: Timeline,
        run_dir: Path,
        fault_timeout_s: float,
        unexpected: list[IncidentRecord],
    ) -> None:
        self.store = store
        self.timeline = timeline
        self.run_dir = run_dir
        self.fault_timeout_s = fault_timeout_s
        self.unexpected = unexpected

    def wait(self, what: str, check: Callable[[], Any], timeout_s: float) -> Any:
        deadline = time.time() + timeout_s
        while time.time() < deadline:
            value = check()
            if value:
                return value
            time.sleep(0.1)
        raise DemoError(f"timed out after {timeout_s:.0f} s waiting for {what}")

    def iteration(self, job_id: str) -> int:
        job = self.store.get_job(job_id)
        return job.last_iteration or 0 if job else 0

    def wait_steady(self, job_id: str, iterations: int) -> int:
        start = self.iteration(job_id)
        self.wait(
            f"{iterations} iterations of progress",
            lambda: self.iteration(job_id) >= start + iterations,
            self.fault_timeout_s,
        )
        return self.iteration(job_id)

    def advice(self, incident: IncidentRecord) -> AdviceRecord:
        advice: AdviceRecord = self.wait(
            f"advice for incident {incident.id}",
            lambda: next(
                (
                    a
                    for a in self.store.list_advice(incident.job_id)
                    if a.incident_id == incident.id
                ),
                None,
            ),
            10.0,
        )
        return advice

    def next_incident(
        self, job_id: str, scenario: Scenario, seen: set[int]
    ) -> IncidentRecord | None:
        """The next incident for this fault. A straggler report while another fault is being
        shown (2 shared cores make step times noisy) is kept aside in ``unexpected``."""
        for incident in self.store.list_incidents(job_id):
            if incident.id in seen:
                continue
            straggler = incident.kind is Kind.STRAGGLER
            if straggler and scenario.expected_kind is not Kind.STRAGGLER:
                seen.add(incident.id)
                self.unexpected.append(incident)
                self.timeline.say(f"note: unexpected straggler report {incident.basis}")
                continue
            return incident
        return None

    def fired_at(self, fault_id: str, attempt: int) -> float | None:
        """When the trainer actually fired the fault in that attempt (its faults.log), the
        earliest rank first; None when it left no record."""
        times: list[float] = []
        try:
            lines = (self.run_dir / "faults.log").read_text().splitlines()
        except OSError:
            return None
        for line in lines:
            try:
                record = json.loads(line)
            except ValueError:
                continue  # a line being written
            if record.get("id") == fault_id and record.get("attempt") == attempt:
                times.append(float(record["time"]))
        return min(times, default=None)

    def first_progress(self, job_id: str, after_attempt: int) -> float:
        def first_progress() -> float | None:
            for record in self.store.list_attempts(job_id):
                if record.attempt > after_attempt and record.first_progress_at is not None:
                    return record.first_progress_at
            return None

        found: float = self.wait("training progress", first_progress, 90.0)
        return found

    def productive_again(self, job_id: str, failed_attempt: int) -> float:
        productive = self.first_progress(job_id, failed_attempt)
        resumed = next(a for a in self.store.list_attempts(job_id) if a.attempt > failed_attempt)
        self.timeline.say(
            f"productive again: attempt {resumed.attempt} on {', '.join(resumed.nodes)} "
            f"from iteration {resumed.first_iteration}"
        )
        return productive

    def actions_taken(self, job_id: str) -> int:
        """Advice trainmedic carried out (0 is what monitor mode must show)."""
        return sum(1 for a in self.store.list_advice(job_id) if a.applied_at is not None)
