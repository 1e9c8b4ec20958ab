"""The lab cluster's layout (paths and ports) and the slurm.conf rendered from it.

Kept pure: the layout is a value, the config a string, so a test can check the settings
SLURM_LAB.md found necessary without starting anything.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

PARTITION = "debug"


@dataclass(frozen=True, slots=True)
class LabLayout:
    """Where one lab cluster keeps its files and which ports it listens on."""

    base: Path
    cluster_name: str
    node_names: tuple[str, ...]
    slurmctld_port: int
    slurmd_ports: tuple[int, ...]
    telemetry_ports: tuple[int, ...]
    cpus_per_node: int = 2
    cred_expire: int = 10
    slurmd_timeout: int = 10
    return_to_service: int = 1
    kill_wait: int = 2

    @property
    def conf_path(self) -> Path:
        return self.base / "etc" / "slurm.conf"

    @property
    def munge_dir(self) -> Path:
        return self.base / "munge"

    @property
    def munge_socket(self) -> Path:
        return self.munge_dir / "munge.socket"

    @property
    def munge_key(self) -> Path:
        return self.munge_dir / "munge.key"

    @property
    def state_dir(self) -> Path:
        return self.base / "state"

    @property
    def log_dir(self) -> Path:
        return self.base / "log"

    @property
    def run_dir(self) -> Path:
        return self.base / "run"

    @property
    def spool_root(self) -> Path:
        return self.base / "spool"

    @property
    def jobcomp_path(self) -> Path:
        return self.log_dir / "jobcomp.txt"

    @property
    def layout_path(self) -> Path:
        """The layout as JSON, so another process can ``SlurmCluster.attach`` to the cluster."""
        return self.run_dir / "cluster.json"

    @property
    def pids_path(self) -> Path:
        """Every pid the harness started, so ``down --dir`` can stop exactly those."""
        return self.run_dir / "pids.json"

    def node_dir(self, node: str) -> Path:
        return self.base / "nodes" / node

    def spool_dir(self, node: str) -> Path:
        return self.spool_root / node

    def slurmd_log(self, node: str) -> Path:
        return self.log_dir / f"slurmd-{node}.log"

    def slurmctld_log(self) -> Path:
        return self.log_dir / "slurmctld.log"


def layout_to_json(layout: LabLayout) -> str:
    data = {f: getattr(layout, f) for f in layout.__dataclass_fields__}
    data["base"] = str(layout.base)
    return json.dumps(data, indent=1)


def layout_from_json(text: str) -> LabLayout:
    data = json.loads(text)
    data["base"] = Path(data["base"])
    for key in ("node_names", "slurmd_ports", "telemetry_ports"):
        data[key] = tuple(data[key])
    return LabLayout(**data)


def render_slurm_conf(layout: LabLayout) -> str:
    """slurm.conf for N slurmd on one host, each with its own port and spool directory."""
    b = layout.base
    lines = [
        f"ClusterName={layout.cluster_name}",
        "SlurmctldHost=localhost",
        f"SlurmctldPort={layout.slurmctld_port}",
        "SlurmUser=root",
        "SlurmdUser=root",
        f"AuthInfo=socket={layout.munge_socket},cred_expire={layout.cred_expire}",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core",
        # Lets the configured CPUs exceed the real cores of this small machine.
        "SlurmdParameters=config_overrides",
        "SchedulerParameters=bf_interval=1,sched_interval=2",
        "JobRequeue=1",
        f"ReturnToService={layout.return_to_service}",
        f"SlurmdTimeout={layout.slurmd_timeout}",
        # Short KillWait: a requeue must not wait 30 s for a job ignoring SIGTERM.
        f"KillWait={layout.kill_wait}",
        "MinJobAge=300",
        "MailProg=/bin/true",
        "MpiDefault=none",
        "SwitchType=switch/none",
        "AccountingStorageType=accounting_storage/none",
        "JobAcctGatherType=jobacct_gather/none",
        "JobCompType=jobcomp/filetxt",
        f"JobCompLoc={layout.jobcomp_path}",
        f"StateSaveLocation={layout.state_dir}",
        f"SlurmctldPidFile={layout.run_dir / 'slurmctld.pid'}",
        f"SlurmctldLogFile={layout.slurmctld_log()}",
        f"SlurmdSpoolDir={layout.spool_root / '%n'}",
        f"SlurmdPidFile={layout.run_dir / 'slurmd-%n.pid'}",
        f"SlurmdLogFile={layout.log_dir / 'slurmd-%n.log'}",
        f"TmpFS={b / 'tmp'}",
        "SlurmctldDebug=info",
        "SlurmdDebug=info",
    ]
    for name, port in zip(layout.node_names, layout.slurmd_ports, strict=True):
        lines.append(
            f"NodeName={name} NodeHostname=localhost NodeAddr=127.0.0.1 Port={port} "
            f"CPUs={layout.cpus_per_node} RealMemory=1000 State=UNKNOWN"
        )
    lines.append(
        f"PartitionName={PARTITION} Nodes={','.join(layout.node_names)} Default=YES "
        "MaxTime=INFINITE State=UP"
    )
    return "\n".join(lines) + "\n"
