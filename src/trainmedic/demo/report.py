"""The demo's live timeline and its JSON report.

Report format (Unix-time floats; None where a step did not happen)::

    {"incidents": [{"fault", "injected_at", "detected_at", "action_done_at",
                    "productive_again_at", "kind", "category", "implicated_nodes", "action",
                    "expected_kind", "expected_category", ...}],
     "goodput": 0..1, "mode": "action" | "monitor", "actions_taken": N, ...}

``injected_at`` is when the trainer fired the fault (the first rank's record in its
``faults.log``), or when the demo wrote the fault file if the trainer left no record.

``goodput`` is ``core.goodput`` (the one definition, as in ``/metrics``, the API and
``trainmedic report``, computed by ``core.accounting``) over the demo's fault window: the time
attempts spent training between their first and latest step, less checkpoint writes and the
work failures threw away, over the window's wall time. Detection, restart and start-up lower
it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from trainmedic.core.model import Action
from trainmedic.demo.scenarios import Scenario
from trainmedic.service.executor import ExecutorEvent
from trainmedic.store import AdviceRecord, IncidentRecord


@dataclass(frozen=True, slots=True)
class IncidentReport:
    fault: str
    injected_at: float | None
    detected_at: float
    action_done_at: float | None
    productive_again_at: float | None
    kind: str
    category: str
    implicated_nodes: tuple[str, ...]
    action: str
    expected_kind: str
    expected_category: str
    expected_action: str
    drain_nodes: tuple[str, ...]
    exclude_nodes: tuple[str, ...]
    root_cause: str
    basis: str
    detection_basis: str

    def as_json(self) -> dict[str, Any]:
        data = {f: getattr(self, f) for f in self.__slots__}
        data["implicated_nodes"] = list(self.implicated_nodes)
        data["drain_nodes"] = list(self.drain_nodes)
        data["exclude_nodes"] = list(self.exclude_nodes)
        data["detection_latency_s"] = _delta(self.injected_at, self.detected_at)
        data["action_latency_s"] = _delta(self.detected_at, self.action_done_at)
        data["recovery_s"] = _delta(self.detected_at, self.productive_again_at)
        return data


def _delta(start: float | None, end: float | None) -> float | None:
    return None if start is None or end is None else round(end - start, 3)


def report_entry(
    scenario: Scenario,
    incident: IncidentRecord,
    advice: AdviceRecord,
    injected_at: float | None,
    action_done_at: float | None,
    productive_again_at: float | None,
    expected_action: Action,
) -> IncidentReport:
    root = incident.root_cause
    return IncidentReport(
        fault=scenario.fault,
        injected_at=injected_at,
        detected_at=incident.detected_at,
        action_done_at=action_done_at,
        productive_again_at=productive_again_at,
        kind=incident.kind.value,
        category=incident.category.value,
        implicated_nodes=incident.implicated.nodes,
        action=advice.action.value,
        expected_kind=scenario.expected_kind.value,
        expected_category=scenario.expected_category.value,
        expected_action=expected_action.value,
        drain_nodes=advice.drain_nodes,
        exclude_nodes=advice.exclude_nodes,
        root_cause=f"{root.signature}: {root.text[:160]}" if root else "",
        basis=advice.basis,
        detection_basis=incident.basis,
    )


class Timeline:
    """Prints what happens, with seconds since the demo began."""

    def __init__(self, say: Callable[[str], None]) -> None:
        self._say = say
        self._t0 = time.time()

    def say(self, text: str) -> None:
        self._say(f"[{time.time() - self._t0:7.2f}s] {text}")

    def incident(self, incident: IncidentRecord, advice: AdviceRecord) -> None:
        nodes = f" nodes {','.join(incident.implicated.nodes)}" if incident.implicated.nodes else ""
        ranks = f" ranks {','.join(map(str, incident.implicated.ranks))}"
        ranks = ranks if incident.implicated.ranks else ""
        root = f" [{incident.root_cause.signature}]" if incident.root_cause else ""
        self.say(
            f"detected {incident.kind.value} / {incident.category.value}{root}{nodes}{ranks} "
            f"(attempt {incident.attempt})"
        )
        extra = ""
        if advice.exclude_nodes:
            extra += f" excluding {','.join(advice.exclude_nodes)}"
        if advice.drain_nodes:
            extra += f", drain {','.join(advice.drain_nodes)}"
        self.say(f"advice ({advice.mode.value}): {advice.action.value}{extra} -- {advice.basis}")

    def executor(self, event: ExecutorEvent) -> None:
        if event.what in ("claimed", "applied"):
            return
        detail = f": {event.detail}" if event.detail else ""
        self.say(f"executor {event.what} (advice {event.advice_id}){detail}")
