"""What the tests on the real Slurm lab cluster share (the cluster itself is the session
fixture ``slurm_cluster`` in tests/integration/conftest.py):

- ``RecordingRunner``: the real local runner, keeping every command that changes something,
  so a test states exactly what trainmedic did to the cluster;
- ``ServiceThread``: the real service loop in a thread of the test process;
- ``restore_cluster``: the shared cluster put back for the next test.
"""

from __future__ import annotations

import threading

from trainmedic.lab import SlurmCluster
from trainmedic.schedulers.slurm.runner import CompletedCommand, LocalRunner
from trainmedic.service.loop import Service

# The commands that only look: everything else the service runs is a change it made.
READ_ONLY = ({"squeue"}, {"sinfo"}, {"scontrol", "-o", "show"})


class RecordingRunner(LocalRunner):
    """The real local runner, keeping every command that changes something."""

    def __init__(self, slurm_conf: str) -> None:
        super().__init__(slurm_conf)
        self.changes: list[tuple[str, ...]] = []

    def run(self, argv: list[str], timeout: float) -> CompletedCommand:
        if not any(set(argv[: len(ro)]) == ro for ro in READ_ONLY):
            self.changes.append(tuple(argv))
        return super().run(argv, timeout)

    def issued(self, *prefix: str) -> list[tuple[str, ...]]:
        return [c for c in self.changes if c[: len(prefix)] == prefix]


class ServiceThread:
    """``service.run`` in a daemon thread, started at once; ``stop`` ends it."""

    def __init__(self, service: Service) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=service.run, args=(self._stop,), daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)


def restore_cluster(cluster: SlurmCluster, timeout: float = 40) -> None:
    """Every node idle again, no drain, empty kernel logs (a new service reads them whole)."""
    for node, state in cluster.node_states().items():
        if state != "idle":
            cluster.run(["scontrol", "update", f"NodeName={node}", "State=RESUME"], check=False)
    for node in cluster.nodes:
        cluster.kernel_log(node).write_text("")
    cluster.wait_for(
        "all nodes idle",
        lambda: set(cluster.node_states().values()) == {"idle"},
        timeout=timeout,
    )
