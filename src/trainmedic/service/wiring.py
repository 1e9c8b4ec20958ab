"""Build the scheduler adapter a config asks for (local, or Slurm in-cluster / over SSH)."""

from __future__ import annotations

from pathlib import Path

from trainmedic.schedulers.base import SchedulerAdapter
from trainmedic.service.config.sections import Config


def local_cluster_dir(config: Config) -> Path:
    return Path(config.service.state_dir) / "cluster"


def build_adapter(config: Config) -> SchedulerAdapter:
    if config.scheduler.kind == "local":
        from trainmedic.schedulers.local.scheduler import LocalScheduler

        return LocalScheduler(local_cluster_dir(config), nodes=config.scheduler.local.nodes)
    from trainmedic.schedulers.slurm.runner import CommandRunner, LocalRunner, SshRunner
    from trainmedic.schedulers.slurm.scheduler import SlurmScheduler

    slurm = config.scheduler.slurm
    runner: CommandRunner
    if slurm.ssh_host:
        runner = SshRunner(
            slurm.ssh_host,
            known_hosts=slurm.known_hosts or str(Path.home() / ".ssh" / "known_hosts"),
            user=slurm.ssh_user or None,
            port=slurm.ssh_port,
            identity_file=slurm.ssh_key or None,
            slurm_conf=slurm.slurm_conf or None,
        )
    else:
        runner = LocalRunner(slurm.slurm_conf or None)
    return SlurmScheduler(runner)


def kernel_logs_of(adapter: SchedulerAdapter) -> dict[str, str]:
    """Per-node kernel logs the adapter knows of (the local backend's virtual nodes)."""
    from trainmedic.schedulers.local.scheduler import LocalScheduler

    if isinstance(adapter, LocalScheduler):
        return {node: str(adapter.kernel_log(node)) for node in adapter.node_names()}
    return {}
