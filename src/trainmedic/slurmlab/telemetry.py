"""Per-node GPU telemetry for the lab: one DCGM-exporter-compatible ``/metrics`` endpoint per
virtual node.

Values live in a small JSON file in the node's directory (``telemetry.json``), read at scrape
time, so anything on the host (a test, or a job running "on" that node and knowing its
directory from ``$TRAINMEDIC_LAB_DIR/nodes/$SLURMD_NODENAME``) can inject a fault by writing
it. Run as ``python -m trainmedic.slurmlab.telemetry --nodes-dir D node1=PORT ...``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import FrameType

TELEMETRY_FILE = "telemetry.json"
GPUS_PER_NODE = 4

# (metric, type, help, default value): the fields dcgm-exporter's default profile exposes
# that a recovery service reads.
DEFAULT_METRICS: tuple[tuple[str, str, str, float], ...] = (
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).", 40.0),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", 90.0),
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).", 0.0),
    ("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered.", 0.0),
    (
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
        "counter",
        "Total number of double-bit volatile ECC errors.",
        0.0,
    ),
    (
        "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
        "counter",
        "Total number of single-bit volatile ECC errors.",
        0.0,
    ),
)


def read_overrides(node_dir: Path) -> dict[str, dict[str, float]]:
    """``{gpu: {metric: value}}`` from the node's telemetry file; empty when absent or torn."""
    try:
        data = json.loads((node_dir / TELEMETRY_FILE).read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {
        str(gpu): {str(k): float(v) for k, v in values.items()}
        for gpu, values in data.items()
        if isinstance(values, dict)
    }


def set_gpu_metric(node_dir: Path, gpu: int, metric: str, value: float) -> None:
    """Set one metric of one GPU of the node (atomic replace, so a scrape never sees half)."""
    data = read_overrides(node_dir)
    data.setdefault(str(gpu), {})[metric] = float(value)
    node_dir.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=node_dir, prefix=".telemetry.")
    with os.fdopen(fd, "w") as f:
        json.dump(data, f)
    os.replace(tmp, node_dir / TELEMETRY_FILE)


def render_metrics(node: str, overrides: dict[str, dict[str, float]], gpus: int) -> str:
    """Prometheus text exposition in dcgm-exporter's shape (labels gpu, UUID, device, Hostname)."""
    out: list[str] = []
    for metric, kind, help_text, default in DEFAULT_METRICS:
        out.append(f"# HELP {metric} {help_text}")
        out.append(f"# TYPE {metric} {kind}")
        for gpu in range(gpus):
            value = overrides.get(str(gpu), {}).get(metric, default)
            labels = (
                f'gpu="{gpu}",UUID="GPU-lab-{node}-{gpu}",device="nvidia{gpu}",'
                f'modelName="Lab GPU",Hostname="{node}"'
            )
            out.append(f"{metric}{{{labels}}} {value:g}")
    return "\n".join(out) + "\n"


def _handler_for(node: str, node_dir: Path, gpus: int) -> type[BaseHTTPRequestHandler]:
    class MetricsHandler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.split("?")[0] != "/metrics":
                self.send_error(404)
                return
            body = render_metrics(node, read_overrides(node_dir), gpus).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            """Scrapes are frequent; keep the log file for errors."""

    return MetricsHandler


def serve(nodes_dir: Path, ports: dict[str, int], gpus: int) -> None:
    servers = [
        ThreadingHTTPServer(("127.0.0.1", port), _handler_for(node, nodes_dir / node, gpus))
        for node, port in ports.items()
    ]
    done = threading.Event()

    def _stop(signum: int, frame: FrameType | None) -> None:
        done.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    threads = [threading.Thread(target=s.serve_forever, daemon=True) for s in servers]
    for t in threads:
        t.start()
    print("ready", flush=True)
    done.wait()
    for s in servers:
        s.shutdown()
        s.server_close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainmedic.slurmlab.telemetry")
    parser.add_argument("--nodes-dir", type=Path, required=True)
    parser.add_argument("--gpus", type=int, default=GPUS_PER_NODE)
    parser.add_argument("node_ports", nargs="+", metavar="NODE=PORT")
    args = parser.parse_args(argv)
    ports: dict[str, int] = {}
    for item in args.node_ports:
        node, _, port = item.partition("=")
        if not port.isdigit():
            parser.error(f"expected NODE=PORT, got {item!r}")
        ports[node] = int(port)
    serve(args.nodes_dir, ports, args.gpus)
    return 0


if __name__ == "__main__":
    sys.exit(main())
