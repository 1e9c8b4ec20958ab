"""The per-node sources of the service: each node's kernel log and its GPU telemetry.

Kernel logs are files, read in the loop (a poll with nothing new costs one ``stat``). GPU
telemetry comes from each node's DCGM exporter over HTTP, which can be slow or dead, so it is
scraped in a thread of its own (``TelemetryPoller``) and the loop only takes what is ready:
a slow endpoint never delays detection. Only the nodes of watched jobs are scraped, and a node
a job left is scraped a while longer (``KEEP_NODE_S``): the Xid that ended an attempt may be
exported after the job was gone from it.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from datetime import tzinfo

from trainmedic.core.observations import Observation
from trainmedic.service.config.sections import TelemetryConfig
from trainmedic.service.source_status import SourceBoard
from trainmedic.sources.dcgm import TelemetryPoller
from trainmedic.sources.kernel import KernelLogSource
from trainmedic.sources.lines import Clock
from trainmedic.sources.offsets import OffsetBook

KEEP_NODE_S = 300.0


class NodeSources:
    def __init__(
        self,
        board: SourceBoard,
        telemetry: TelemetryConfig,
        *,
        kernel_logs: Mapping[str, str] | None = None,
        kernel_template: str = "",
        telemetry_urls: Mapping[str, str] | None = None,
        tz: tzinfo | None = None,
        clock: Clock = time.time,
        book: OffsetBook | None = None,
    ) -> None:
        self._board = board
        self._tz = tz
        self._book = book  # where a restarted service left each kernel log
        self._clock = clock
        self._kernel: dict[str, KernelLogSource] = {}
        self._kernel_template = kernel_template
        self._urls = {**telemetry.dcgm_urls, **(telemetry_urls or {})}
        self._telemetry = telemetry
        self._poller: TelemetryPoller | None = None
        if telemetry.enabled or self._urls:
            self._poller = TelemetryPoller(
                self.url_of,
                interval_s=telemetry.scrape_interval_s,
                timeout_s=telemetry.timeout_s,
                clock=clock,
            )
        self._scraped: dict[str, float] = {}  # node -> last time a watched job ran on it
        for node, path in (kernel_logs or {}).items():
            self.add_kernel_log(node, path)

    def url_of(self, node: str) -> str | None:
        return self._urls.get(node) or self._telemetry.url_of(node)

    def add_kernel_log(self, node: str, path: str) -> None:
        if node not in self._kernel:
            self._kernel[node] = KernelLogSource(
                node, path, tz=self._tz, clock=self._clock, book=self._book
            )
            self._board.declare(f"kernel:{node}", self._clock(), node=node)

    def kernel_log_nodes(self) -> frozenset[str]:
        """Nodes whose kernel log is followed and could be read at the last poll."""
        return frozenset(node for node, source in self._kernel.items() if not source.missing)

    def jobs_run_on(self, nodes: Iterable[str], now: float) -> None:
        """Nodes that watched jobs run on now: their kernel logs (from the config's template)
        and telemetry are followed from here on."""
        for node in nodes:
            if node not in self._kernel and self._kernel_template:
                self.add_kernel_log(node, self._kernel_template.format(node=node))
            if self._poller is not None and self.url_of(node):
                if node not in self._scraped:
                    self._board.declare(f"dcgm:{node}", now, node=node)
                self._scraped[node] = now

    def poll(self, now: float) -> list[Observation]:
        out: list[Observation] = []
        for kernel in self._kernel.values():
            out.extend(kernel.poll())
        if self._poller is not None:
            self._scraped = {n: t for n, t in self._scraped.items() if now - t <= KEEP_NODE_S}
            self._poller.set_nodes(self._scraped)
            if self._scraped:
                self._poller.start()
            out.extend(self._poller.drain())
        return out

    def close(self) -> None:
        if self._poller is not None:
            self._poller.stop()
        for kernel in self._kernel.values():
            kernel.close()
