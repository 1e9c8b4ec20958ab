"""trainmedic.core.policy: what to do about a verdict (pure; see ``decide``)."""

from trainmedic.core.policy.context import AttemptRecord, PolicyContext
from trainmedic.core.policy.decide import (
    attempts_without_checkpoint,
    budget_used,
    decide,
    same_failure,
    spends_budget,
)
from trainmedic.core.policy.isolation import Isolation, choose_isolation, system_evidence

__all__ = [
    "AttemptRecord",
    "Isolation",
    "PolicyContext",
    "attempts_without_checkpoint",
    "budget_used",
    "choose_isolation",
    "decide",
    "same_failure",
    "spends_budget",
    "system_evidence",
]
