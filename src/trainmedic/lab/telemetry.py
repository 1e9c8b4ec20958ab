"""Per-node GPU telemetry for the lab: one DCGM-exporter-compatible ``/metrics`` endpoint per
virtual node (``trainmedic.lab.dcgm_stub.DcgmExporterStub``), in a process of its own.

Values live in a small JSON file in the node's directory (``telemetry.json``), read at scrape
time, so anything on the host (a test, or a job running "on" that node and knowing its
directory from ``$TRAINMEDIC_LAB_DIR/nodes/$SLURMD_NODENAME``) can inject a fault by writing
it. Run as ``python -m trainmedic.lab.telemetry --nodes-dir D node1=PORT ...``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import threading
from pathlib import Path
from types import FrameType

from trainmedic.lab.dcgm_stub import DcgmExporterStub

TELEMETRY_FILE = "telemetry.json"
GPUS_PER_NODE = 4


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


class FileBackedStub(DcgmExporterStub):
    """The project's DCGM-exporter stand-in, its values refreshed from the node's telemetry
    file at every scrape (so other processes can inject faults)."""

    def __init__(self, node: str, node_dir: Path, gpus: int, port: int) -> None:
        super().__init__(node, gpus=gpus, port=port)
        self.node_dir = node_dir

    def exposition(self) -> str:
        for gpu, values in read_overrides(self.node_dir).items():
            if gpu.isdigit() and int(gpu) < self.gpus:
                for metric, value in values.items():
                    self.set_value(metric, int(gpu), value)
        return super().exposition()


def serve(nodes_dir: Path, ports: dict[str, int], gpus: int) -> None:
    """Serve every node's endpoint until SIGTERM / SIGINT."""
    done = threading.Event()

    def _stop(signum: int, frame: FrameType | None) -> None:
        done.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    stubs = [
        FileBackedStub(node, nodes_dir / node, gpus, port).start() for node, port in ports.items()
    ]
    print("ready", flush=True)
    done.wait()
    for stub in stubs:
        stub.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainmedic.lab.telemetry")
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
