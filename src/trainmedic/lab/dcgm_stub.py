"""A tiny DCGM-exporter stand-in: a real HTTP server whose exposition text you can change.

Used by the tests and by the demo/harness as each virtual node's telemetry endpoint. It
serves ``/metrics`` in dcgm-exporter's format (HELP/TYPE lines; labels gpu, UUID,
pci_bus_id, device, modelName, Hostname) from a thread; setters inject faults::

    with DcgmExporterStub("node2", gpus=2) as stub:
        scraper = DcgmScraper("node2", stub.url)
        stub.set_xid(0, 79)
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType

from trainmedic.core.telemetry import (
    DBE_AGGREGATE,
    DBE_VOLATILE,
    GPU_TEMP,
    NVLINK_ERRORS,
    ROW_REMAP_FAILURE,
    THERMAL_VIOLATION,
    XID,
)

_HELP = {
    GPU_TEMP: ("gauge", "GPU temperature (in C)."),
    XID: ("gauge", "Value of the last XID error encountered."),
    DBE_VOLATILE: ("counter", "Total number of double-bit volatile ECC errors."),
    DBE_AGGREGATE: ("counter", "Total number of double-bit persistent ECC errors."),
    ROW_REMAP_FAILURE: ("gauge", "Whether remapping of rows has failed"),
    THERMAL_VIOLATION: ("counter", "Throttling duration due to thermal constraints (in us)."),
    NVLINK_ERRORS[0]: ("counter", "Total number of NVLink flow-control CRC errors."),
    NVLINK_ERRORS[1]: ("counter", "Total number of NVLink data CRC errors."),
}


class DcgmExporterStub:
    def __init__(
        self, hostname: str, gpus: int = 2, *, host: str = "127.0.0.1", port: int = 0
    ) -> None:
        self.hostname = hostname
        self.gpus = gpus
        self._lock = threading.Lock()
        self._values: dict[tuple[str, int], float] = {
            (metric, gpu): 0.0 for metric in _HELP for gpu in range(gpus)
        }
        for gpu in range(gpus):
            self._values[(GPU_TEMP, gpu)] = 34.0 + gpu
        self.requests = 0
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path.split("?")[0] != "/metrics":
                    self.send_error(404)
                    return
                body = stub.exposition().encode()
                stub.requests += 1
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                return  # keep test output clean

        self._server = ThreadingHTTPServer((host, port), Handler)
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/metrics"

    def start(self) -> DcgmExporterStub:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._server.serve_forever, name=f"dcgm-stub-{self.hostname}", daemon=True
            )
            self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(timeout=5)
            self._thread = None
        self._server.server_close()

    def __enter__(self) -> DcgmExporterStub:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- fault injection -----------------------------------------------------------------

    def set_value(self, metric: str, gpu: int, value: float) -> None:
        with self._lock:
            self._values[(metric, gpu)] = value

    def add(self, metric: str, gpu: int, amount: float = 1.0) -> None:
        with self._lock:
            self._values[(metric, gpu)] = self._values.get((metric, gpu), 0.0) + amount

    def set_xid(self, gpu: int, xid: int) -> None:
        self.set_value(XID, gpu, xid)

    def add_dbe(self, gpu: int, count: int = 1) -> None:
        self.add(DBE_VOLATILE, gpu, count)
        self.add(DBE_AGGREGATE, gpu, count)

    def set_row_remap_failure(self, gpu: int, failed: bool = True) -> None:
        self.set_value(ROW_REMAP_FAILURE, gpu, 1.0 if failed else 0.0)

    def add_nvlink_errors(self, gpu: int, count: int = 1) -> None:
        self.add(NVLINK_ERRORS[0], gpu, count)

    # -- exposition ----------------------------------------------------------------------

    def labels(self, gpu: int) -> str:
        return (
            f'gpu="{gpu}",UUID="GPU-{self.hostname}-{gpu:04d}-5e1c-8b1f-0a3b9d2c7e11",'
            f'pci_bus_id="00000000:{0x18 + 0x20 * gpu:02X}:00.0",device="nvidia{gpu}",'
            f'modelName="NVIDIA H100 80GB HBM3",Hostname="{self.hostname}",'
            'DCGM_FI_DRIVER_VERSION="550.54.15"'
        )

    def exposition(self) -> str:
        with self._lock:
            values = dict(self._values)
        lines: list[str] = []
        metrics = sorted({metric for metric, _ in values})
        for metric in metrics:
            kind, text = _HELP.get(metric, ("gauge", metric))
            lines += [f"# HELP {metric} {text}", f"# TYPE {metric} {kind}"]
            for gpu in range(self.gpus):
                value = values.get((metric, gpu), 0.0)
                extra = ""
                if metric == XID:
                    extra = f',err_code="{int(value)}"'
                lines.append(f"{metric}{{{self.labels(gpu)}{extra}}} {value:g}")
        return "\n".join(lines) + "\n"
