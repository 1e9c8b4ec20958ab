"""``python -m trainmedic.lab up|down|status --dir D``: the lab cluster without pytest."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from trainmedic.lab.cluster import SlurmCluster
from trainmedic.lab.install import SlurmLabUnavailable


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainmedic.lab")
    parser.add_argument("action", choices=("up", "down", "status"))
    parser.add_argument("--dir", type=Path, required=True, help="the cluster's directory")
    parser.add_argument("--nodes", type=int, default=4)
    parser.add_argument("--cpus-per-node", type=int, default=2)
    parser.add_argument("--cred-expire", type=int, default=10)
    args = parser.parse_args(argv)
    conf = args.dir.resolve() / "etc" / "slurm.conf"
    if args.action == "up":
        if SlurmCluster.stop_recorded(args.dir):
            print(f"stopped the cluster already running in {args.dir}", file=sys.stderr)
        cluster = SlurmCluster(
            args.dir,
            nodes=args.nodes,
            cpus_per_node=args.cpus_per_node,
            cred_expire=args.cred_expire,
        )
        try:
            cluster.start()
        except (SlurmLabUnavailable, TimeoutError) as err:
            print(f"slurmlab up: {err}", file=sys.stderr)
            return 1
        print(f"# {len(cluster.nodes)} nodes idle in {cluster.start_seconds:.2f} s")
        for node in cluster.nodes:
            print(f"# {node}: kernel log {cluster.kernel_log(node)}, {cluster.telemetry_url(node)}")
        print(f"export SLURM_CONF={conf}")
        return 0
    if args.action == "down":
        count = SlurmCluster.stop_recorded(args.dir)
        print(f"stopped {count} processes")
        return 0
    done = subprocess.run(
        ["sinfo", "-N"], env={"SLURM_CONF": str(conf), "PATH": "/usr/bin:/bin"}, check=False
    )
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
