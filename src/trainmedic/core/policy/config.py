"""``[policy]`` of the config file: budgets, stop rules, drain limits (frozen, validated).

Part of the core because the pure policy reads it; the service's config file embeds it as
its ``[policy]`` table and a job's opt-in may override its keys.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from trainmedic.core.model import Category


@dataclass(frozen=True, slots=True)
class RetryBudgets:
    """``[policy.retry_budget]``: restarts allowed per root-cause category, counting only
    failures with no progress since the previous one. Scheduler causes (preemption, time
    limit) never spend a budget."""

    hardware: int = 5
    """GPU, network and node hardware."""
    unknown: int = 3
    system_software: int = 2
    storage: int = 2
    application: int = 1
    """One confirmation retry, then a deterministic application error stops."""

    def __post_init__(self) -> None:
        for name in ("hardware", "unknown", "system_software", "storage", "application"):
            if getattr(self, name) < 0:
                raise ValueError(f"policy.retry_budget.{name} must be >= 0")

    def for_category(self, category: Category) -> int | None:
        """The budget of a category; None = unlimited (the scheduler's own interruptions)."""
        if category is Category.SCHEDULER:
            return None
        if category.is_hardware():
            return self.hardware
        budget: int = getattr(self, category.value)
        return budget


@dataclass(frozen=True, slots=True)
class PolicyConfig:
    """``[policy]``: what to do about an interruption. A job may override these keys in its
    registration (API) or Slurm comment."""

    retry_budget: RetryBudgets = field(default_factory=RetryBudgets)
    """Per-category budgets, see ``[policy.retry_budget]``."""
    max_attempts_without_checkpoint: int = 3
    """Stop after this many attempts in a row that wrote no new checkpoint."""
    stop_enforcement: bool = False
    """False (default): stop advice is only recorded, the job is left to its owner. True:
    action mode cancels the job (NVRx makes STOP opt-in too)."""
    drain_enabled: bool = True
    """Drain nodes with strong hardware evidence from a system source (action mode only)."""
    max_drain_fraction: float = 0.25
    """Circuit breaker: never drain more than this fraction of the known nodes..."""
    drain_window_s: float = 3600.0
    """...within this many seconds."""
    repeat_offender_count: int = 2
    """A node implicated in this many incidents (across jobs) within
    ``repeat_offender_window_s`` gets drain advice even on weaker evidence."""
    repeat_offender_window_s: float = 86400.0

    def __post_init__(self) -> None:
        if self.max_attempts_without_checkpoint < 1:
            raise ValueError("policy.max_attempts_without_checkpoint must be >= 1")
        if not 0.0 <= self.max_drain_fraction <= 1.0:
            raise ValueError(
                f"policy.max_drain_fraction must be in [0, 1], got {self.max_drain_fraction}"
            )
        positive("policy.drain_window_s", self.drain_window_s)
        positive("policy.repeat_offender_window_s", self.repeat_offender_window_s)
        if self.repeat_offender_count < 1:
            raise ValueError("policy.repeat_offender_count must be >= 1")


def positive(name: str, value: float) -> None:
    if value <= 0:
        raise ValueError(f"{name} must be > 0, got {value}")
