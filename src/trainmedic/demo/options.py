"""The demo's settings: its four virtual nodes, the options ``trainmedic demo`` passes, and
the service configuration the demo runs the real service with."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from trainmedic.core.detect.config import SMALL_JOB
from trainmedic.demo.scenarios import Scenario
from trainmedic.service.config.loader import default_config
from trainmedic.service.config.sections import Config

NODES = ("node1", "node2", "node3", "node4")


@dataclass(frozen=True, slots=True)
class DemoOptions:
    mode: str = "action"
    workdir: Path | None = None
    scenarios: tuple[Scenario, ...] = ()
    fault_timeout_s: float = 60.0
    api: bool = True


def demo_config(mode: str) -> Config:
    base = default_config()
    return dataclasses.replace(
        base,
        service=dataclasses.replace(base.service, mode=mode, poll_interval_s=0.2),  # type: ignore[arg-type]
        policy=dataclasses.replace(base.policy, stop_enforcement=True),
        # The example trainer reports every step (ms apart) and starts in seconds.
        detect=SMALL_JOB,
    )
