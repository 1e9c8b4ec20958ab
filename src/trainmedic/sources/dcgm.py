"""GPU telemetry from a DCGM-exporter-compatible Prometheus endpoint, one per node.

``DcgmScraper.poll()`` fetches the text exposition (1 s timeout), keeps the health metrics in
``WATCHED`` and returns them as ``TelemetrySample``s; an unreachable or malformed endpoint
gives one ``SourceStale`` per outage and never raises. ``telemetry_to_events`` (pure) turns
changes between two scrapes into ``Event``s for attribution.
"""

from __future__ import annotations

import http.client
import time
import urllib.error
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from trainmedic.core.observations import Observation, SourceStale, TelemetrySample
from trainmedic.core.telemetry import WATCHED
from trainmedic.sources.lines import Clock

GPU_LABELS = ("gpu", "UUID", "pci_bus_id")
"""Labels naming the GPU, in order of preference (dcgm-exporter sets all three)."""

MAX_BODY_BYTES = 4 * 1024 * 1024


def parse_exposition(text: str, node: str, now: float) -> list[TelemetrySample]:
    """The watched samples of one scrape. Raises ValueError on malformed text."""
    samples: list[TelemetrySample] = []
    for family in text_string_to_metric_families(text):
        if family.name not in WATCHED:
            continue
        for sample in family.samples:
            # The parser names counter samples `<name>_total` and adds `_created` ones.
            if sample.name not in (family.name, family.name + "_total"):
                continue
            gpu = next((sample.labels[k] for k in GPU_LABELS if sample.labels.get(k)), "")
            samples.append(TelemetrySample(now, node, gpu, family.name, float(sample.value)))
    return samples


class DcgmScraper:
    def __init__(
        self, node: str, url: str, *, timeout_s: float = 1.0, clock: Clock = time.time
    ) -> None:
        self.node = node
        self.url = url
        self.timeout_s = timeout_s
        self._clock = clock
        self.stale = False
        # Exporters sit on the cluster network: an HTTP(S)_PROXY meant for the internet
        # must not capture these requests.
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def poll(self) -> list[Observation]:
        now = self._clock()
        try:
            with self._opener.open(self.url, timeout=self.timeout_s) as response:
                body = response.read(MAX_BODY_BYTES)
            samples = parse_exposition(body.decode("utf-8", errors="replace"), self.node, now)
        except (OSError, http.client.HTTPException, ValueError) as exc:
            # URLError, timeouts and refused connections are OSErrors; a malformed page is a
            # ValueError. Either way the telemetry is unknown, which is not a failure.
            if self.stale:
                return []
            self.stale = True
            reason: object = exc  # HTTPError prints "HTTP Error 404: Not Found"
            if isinstance(exc, urllib.error.URLError) and not isinstance(
                exc, urllib.error.HTTPError
            ):
                reason = exc.reason  # e.g. "[Errno 111] Connection refused"
            return [SourceStale(now, f"dcgm:{self.node}", f"{self.url}: {reason}", node=self.node)]
        self.stale = False
        return list(samples)
