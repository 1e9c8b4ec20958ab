"""The demo's faults, in the order they are injected, with what trainmedic should conclude.

Each scenario is a fault for the example trainer (see ``trainmedic.demo.trainer.faults``) and
the expected outcome. ``target`` says where it lands: ``second_node`` is the job's second
node (so the restart must move to a spare), ``last_rank`` the highest rank (which runs on the
second node). A scenario with ``at_iter_ahead`` fires that many iterations after injection,
after the next checkpoint, so the confirmation retry resumes before it and meets it again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from trainmedic.core.model import Action, Category, Kind


@dataclass(frozen=True, slots=True)
class Scenario:
    fault: str
    trainer_fault: dict[str, Any]
    expected_kind: Kind
    expected_category: Category
    expected_actions: tuple[Action, ...]  # one per incident it should cause, in order
    target: str = ""  # "second_node" | "last_rank" | ""
    at_iter_ahead: int | None = None
    interrupts: bool = True  # the job stops making progress until trainmedic acts
    notes: tuple[str, ...] = field(default_factory=tuple)


SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        fault="xid79",
        trainer_fault={"type": "xid79"},
        expected_kind=Kind.CRASH,
        expected_category=Category.GPU_HARDWARE,
        expected_actions=(Action.RESTART_EXCLUDING,),
        target="second_node",
    ),
    Scenario(
        fault="hang",
        trainer_fault={"type": "hang"},
        expected_kind=Kind.HANG,
        expected_category=Category.UNKNOWN,
        expected_actions=(Action.RESTART,),
        target="last_rank",
    ),
    Scenario(
        fault="slow_rank",
        trainer_fault={"type": "slow", "slow_s": 0.05, "duration_iters": 150},
        expected_kind=Kind.STRAGGLER,
        expected_category=Category.UNKNOWN,
        expected_actions=(Action.NONE,),
        target="last_rank",
        interrupts=False,
    ),
    Scenario(
        fault="app_error",
        trainer_fault={"type": "app_error", "error": "key"},
        expected_kind=Kind.CRASH,
        expected_category=Category.APPLICATION,
        # The confirmation retry moves off as many nodes as there are spares.
        expected_actions=(Action.RESTART_EXCLUDING, Action.STOP),
        at_iter_ahead=45,
    ),
)


def by_name(names: list[str] | None) -> tuple[Scenario, ...]:
    if not names:
        return SCENARIOS
    known = {s.fault: s for s in SCENARIOS}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"unknown fault {', '.join(unknown)}; choose from {', '.join(known)}")
    return tuple(known[n] for n in names)
