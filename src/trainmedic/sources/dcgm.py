"""GPU telemetry from a DCGM-exporter-compatible Prometheus endpoint, one per node.

``DcgmScraper.poll()`` fetches the text exposition (1 s timeout), keeps the health metrics in
``WATCHED`` and returns them as ``TelemetrySample``s; an unreachable or malformed endpoint
gives one ``SourceStale`` per outage (``stale`` says whether it is in one) and never raises.
``telemetry_to_events`` (pure) turns changes between two scrapes into ``Event``s for
attribution.

``TelemetryPoller`` runs the scrapers of a changing set of nodes in a background thread, so a
slow or dead endpoint never delays the service loop, which only takes what was scraped; it
reports a ``SourceRecovered`` when an endpoint answers again after an outage.
"""

from __future__ import annotations

import http.client
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor

from prometheus_client.parser import text_string_to_metric_families

from trainmedic.core.observations import (
    Observation,
    SourceRecovered,
    SourceStale,
    TelemetrySample,
)
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


UrlOf = Callable[[str], str | None]
"""The DCGM-exporter URL of a node, or None when it has none."""


class TelemetryPoller:
    """Scrape every ``interval_s`` the endpoints of the nodes ``set_nodes`` names, in a thread
    of its own (``start``/``stop``), up to ``workers`` endpoints at once, each request
    bounded by ``timeout_s``. ``drain()`` hands over what was scraped since its last call and
    never waits for a scrape. ``scrape_once()`` is one round, for tests and for callers that
    want no thread."""

    def __init__(
        self,
        url_of: UrlOf,
        *,
        interval_s: float = 10.0,
        timeout_s: float = 2.0,
        workers: int = 8,
        clock: Clock = time.time,
    ) -> None:
        self.url_of = url_of
        self.interval_s = interval_s
        self.timeout_s = timeout_s
        self._clock = clock
        self._lock = threading.Lock()
        self._nodes: tuple[str, ...] = ()
        self._scrapers: dict[str, DcgmScraper] = {}
        self._ready: list[Observation] = []
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="dcgm-scrape")
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.rounds = 0

    def set_nodes(self, nodes: Iterable[str]) -> None:
        """The nodes to scrape from the next round on (those without a URL are skipped)."""
        with self._lock:
            self._nodes = tuple(dict.fromkeys(nodes))

    def drain(self) -> list[Observation]:
        with self._lock:
            ready, self._ready = self._ready, []
        return ready

    def scrape_once(self) -> None:
        with self._lock:
            nodes = self._nodes
        scrapers: list[DcgmScraper] = []
        for node in nodes:
            url = self.url_of(node)
            if not url:
                continue
            scraper = self._scrapers.get(node)
            if scraper is None or scraper.url != url:
                scraper = self._scrapers[node] = DcgmScraper(
                    node, url, timeout_s=self.timeout_s, clock=self._clock
                )
            scrapers.append(scraper)
        for found in self._pool.map(self._poll, scrapers):
            with self._lock:
                self._ready.extend(found)
        self.rounds += 1

    def _poll(self, scraper: DcgmScraper) -> list[Observation]:
        """One scrape, with a ``SourceRecovered`` when it ends an outage."""
        was_stale = scraper.stale
        found = scraper.poll()
        if was_stale and not scraper.stale:
            found.append(SourceRecovered(self._clock(), f"dcgm:{scraper.node}", node=scraper.node))
        return found

    def start(self) -> TelemetryPoller:
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="dcgm-poller", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.timeout_s + 5.0)
            self._thread = None
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            self.scrape_once()
            self._stop.wait(max(0.0, self.interval_s - (time.monotonic() - started)))
