"""Recovery latency targets, measured from the demo's own reports over repeated runs.

Runs ``trainmedic demo --report`` N times (real DDP on CPU, local backend, action mode) and
prints, over every injected fault:

* crash detection latency (fault -> incident), p95; goal <= 2 s;
* hang detection latency minus the hang threshold in force, max; goal <= 2 s, and the number
  of hangs raised while no hang was injected (checkpoints every 25 iterations): goal 0;
* action latency (detection -> the scheduler shows the job running again, excluding the bad
  node), p95; goal <= 10 s;
* recovery (detection -> the first training iteration after the restart), p95, with the
  ratio to the cold start of the same job measured in the same run (submit -> first
  iteration: the floor a restart cannot beat without keeping workers warm).

    .venv/bin/python benchmarks/bench_demo.py [--runs 3]

Last line: ``crash_detect_p95_s=<a> hang_over_threshold_max_s=<b> action_p95_s=<c>
recovery_p95_s=<d> recovery_vs_cold_start=<r> false_hangs=<n>``
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

_THRESHOLD = re.compile(r"threshold ([0-9.]+)s")


def p95(values: list[float]) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def run_demo(workdir: Path) -> dict[str, Any]:
    report = workdir / "report.json"
    subprocess.run(
        [sys.executable, "-m", "trainmedic.cli.main", "demo", "--no-api", "--report", str(report)],
        check=True,
        stdout=subprocess.DEVNULL,
        timeout=600,
    )
    data: dict[str, Any] = json.loads(report.read_text())
    return data


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    crash, hang_over, action, recovery, cold = [], [], [], [], []
    false_hangs = 0
    for n in range(args.runs):
        with tempfile.TemporaryDirectory() as tmp:
            report = run_demo(Path(tmp))
        cold.append(report["cold_start_s"])
        for incident in report["incidents"]:
            latency = incident["detection_latency_s"]
            if incident["kind"] == "hang" and incident["fault"] != "hang":
                false_hangs += 1
            if incident["expected_kind"] == "crash" and latency is not None:
                crash.append(latency)
            if incident["fault"] == "hang" and latency is not None:
                found = _THRESHOLD.search(incident["detection_basis"])
                if found:
                    hang_over.append(latency - float(found.group(1)))
            if incident["action_latency_s"] is not None and incident["action"] != "stop":
                action.append(incident["action_latency_s"])
            if incident["recovery_s"] is not None:
                recovery.append(incident["recovery_s"])
        print(
            f"run {n + 1}: {len(report['incidents'])} incidents, goodput {report['goodput']}, "
            f"cold start {report['cold_start_s']} s",
            flush=True,
        )
    cold_start = sorted(cold)[len(cold) // 2]
    print(f"crash detection latencies (s): {sorted(crash)}")
    print(f"hang detection minus threshold (s): {sorted(round(h, 3) for h in hang_over)}")
    print(f"detection -> running again (s): {sorted(action)}")
    print(f"detection -> first iteration again (s): {sorted(recovery)}; cold start {cold_start}")
    print(
        f"crash_detect_p95_s={p95(crash):.3f} "
        f"hang_over_threshold_max_s={max(hang_over, default=float('nan')):.3f} "
        f"action_p95_s={p95(action):.3f} recovery_p95_s={p95(recovery):.3f} "
        f"recovery_vs_cold_start={p95(recovery) / cold_start:.2f} false_hangs={false_hangs}"
    )


if __name__ == "__main__":
    main()
