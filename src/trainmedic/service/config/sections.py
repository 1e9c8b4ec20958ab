"""The sections of the service's TOML config file: one frozen dataclass per table.

Every key is documented on its field. ``trainmedic.service.config.loader`` builds these from TOML
and rejects unknown keys and wrong types; the ``__post_init__`` checks reject bad values.
Paths shown as ``a.b`` are TOML key paths (``[a]`` table, ``b`` key).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from trainmedic.core.detect.config import DetectorConfig
from trainmedic.core.policy.config import PolicyConfig, positive

DEFAULT_API_PORT = 8377
DB_FILE_NAME = "trainmedic.db"


@dataclass(frozen=True, slots=True)
class ServiceConfig:
    """``[service]``: how the service runs."""

    mode: Literal["monitor", "action"] = "monitor"
    """``monitor`` (default) records advice only; ``action`` carries it out for the jobs
    that ``[watch]`` allows (``action_partitions`` / ``action_jobs``)."""
    poll_interval_s: float = 0.5
    """Seconds between two polls of the sources and the scheduler."""
    state_dir: str = ""
    """Directory for the database and service files. "" = ``$TRAINMEDIC_STATE_DIR`` or
    ``~/.local/state/trainmedic``, resolved when the config is loaded."""
    db_url: str = ""
    """SQLAlchemy URL of the store. "" = SQLite file ``trainmedic.db`` in ``state_dir``; a
    ``postgresql://user@host/db`` URL uses PostgreSQL."""
    api_host: str = "127.0.0.1"
    """Address the HTTP API listens on."""
    api_port: int = DEFAULT_API_PORT
    """Port of the HTTP API."""
    api_token: str = ""
    """Bearer token for the API's mutating endpoints (the write token; it also reads).
    "" = ``$TRAINMEDIC_API_TOKEN``; with neither, mutating endpoints are refused (403)."""
    api_read_token: str = ""
    """Bearer token for the API's read endpoints (jobs, incidents, advice, nodes, metrics;
    ``/healthz`` needs none). "" = ``$TRAINMEDIC_API_READ_TOKEN``; with neither it nor a
    write token, reads are refused (403)."""
    watchdog_timeout_s: float = 60.0
    """A job held by trainmedic longer than this goes back to normal scheduling."""

    def __post_init__(self) -> None:
        positive("service.poll_interval_s", self.poll_interval_s)
        positive("service.watchdog_timeout_s", self.watchdog_timeout_s)
        if not 0 < self.api_port < 65536:
            raise ValueError(f"service.api_port must be in 1..65535, got {self.api_port}")


DEFAULT_MAX_BODY_BYTES = 64 * 1024


@dataclass(frozen=True, slots=True)
class ApiConfig:
    """``[api]``: what the HTTP API accepts (address, port and tokens are in ``[service]``)."""

    allowed_roots: tuple[str, ...] = ()
    """Directories under which ``POST /jobs`` accepts log files, kernel logs and checkpoint
    directories (absolute; symbolic links resolved). Empty: any job registered through the
    API must name no path at all."""
    allowed_partitions: tuple[str, ...] = ()
    """Partitions ``POST /jobs`` accepts (empty: any)."""
    allowed_jobs: tuple[str, ...] = ()
    """Job ids ``POST /jobs`` accepts, as shell-style patterns ("12*", "train-?"); empty: any."""
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    """Largest request body accepted; a larger one is refused (413) before it is parsed."""
    tls_certfile: str = ""
    """PEM certificate: with ``tls_keyfile`` the API is served over HTTPS."""
    tls_keyfile: str = ""
    """PEM private key of ``tls_certfile``."""

    def __post_init__(self) -> None:
        for root in self.allowed_roots:
            if not root.startswith("/"):
                raise ValueError(f"api.allowed_roots must be absolute paths, got {root!r}")
        if self.max_body_bytes < 1024:
            raise ValueError(f"api.max_body_bytes must be >= 1024, got {self.max_body_bytes}")
        if bool(self.tls_certfile) != bool(self.tls_keyfile):
            raise ValueError("api.tls_certfile and api.tls_keyfile go together")

    @property
    def tls(self) -> bool:
        return bool(self.tls_certfile and self.tls_keyfile)


@dataclass(frozen=True, slots=True)
class WatchConfig:
    """``[watch]``: which jobs are watched, and which of them action mode may touch.

    A job is watched when its id is in ``jobs``, or when it matches every filter that is set
    (``partitions``, ``users``, ``name_pattern``). With no filter and no ``jobs`` at all,
    every job is watched. Jobs registered through the API or opting in through their Slurm
    comment are watched regardless.
    """

    partitions: tuple[str, ...] = ()
    """Watch jobs in these partitions."""
    users: tuple[str, ...] = ()
    """Watch jobs of these users."""
    name_pattern: str = ""
    """Watch jobs whose name matches this regular expression (``re.search``)."""
    jobs: tuple[str, ...] = ()
    """Watch these job ids."""
    action_partitions: tuple[str, ...] = ()
    """In action mode, act only on jobs in these partitions (see ``action_jobs``)."""
    action_jobs: tuple[str, ...] = ()
    """In action mode, act only on these jobs. With both allowlists empty, action mode
    acts on every watched job (choosing ``mode = "action"`` is the opt-in)."""

    def __post_init__(self) -> None:
        try:
            re.compile(self.name_pattern)
        except re.error as error:
            raise ValueError(f"watch.name_pattern is not a valid regex: {error}") from None

    def watches(self, job_id: str, *, partition: str = "", user: str = "", name: str = "") -> bool:
        if job_id in self.jobs:
            return True
        filters_set = bool(self.partitions or self.users or self.name_pattern)
        if not filters_set:
            return not self.jobs
        return (
            (not self.partitions or partition in self.partitions)
            and (not self.users or user in self.users)
            and (not self.name_pattern or re.search(self.name_pattern, name) is not None)
        )

    def action_allowed(self, job_id: str, *, partition: str = "") -> bool:
        """Whether action mode may act on this job (the mode itself is checked elsewhere)."""
        if not self.action_partitions and not self.action_jobs:
            return True
        return job_id in self.action_jobs or partition in self.action_partitions


@dataclass(frozen=True, slots=True)
class SlurmConfig:
    """``[scheduler.slurm]``: how to reach Slurm. No ``ssh_host``: the local CLI."""

    ssh_host: str = ""
    """Head node to run the Slurm commands on over SSH ("" = run them locally)."""
    ssh_user: str = ""
    """SSH user ("" = the current user)."""
    ssh_port: int = 22
    ssh_key: str = ""
    """Private key file for SSH ("" = ssh's defaults)."""
    known_hosts: str = ""
    """known_hosts file for host-key checking ("" = ssh's default; checking is never off)."""
    slurm_conf: str = ""
    """Path of slurm.conf, exported as SLURM_CONF ("" = Slurm's default)."""
    kernel_log_template: str = ""
    """Each node's kernel log as seen from the service, with ``{node}`` for the node name
    (e.g. "/var/log/nodes/{node}/kern.log"; "" = no kernel logs for discovered jobs)."""
    discovery_interval_s: float = 5.0
    """How often to look for jobs that opted in (comment) or match ``[watch]``."""

    def __post_init__(self) -> None:
        if not 0 < self.ssh_port < 65536:
            raise ValueError(f"scheduler.slurm.ssh_port must be in 1..65535, got {self.ssh_port}")


@dataclass(frozen=True, slots=True)
class LocalConfig:
    """``[scheduler.local]``: the embedded backend running jobs as local process groups."""

    nodes: tuple[str, ...] = ("node1", "node2", "node3", "node4")
    """Names of the virtual nodes."""

    def __post_init__(self) -> None:
        if not self.nodes:
            raise ValueError("scheduler.local.nodes must name at least one node")


@dataclass(frozen=True, slots=True)
class SchedulerConfig:
    """``[scheduler]``: which scheduler the service talks to."""

    kind: Literal["local", "slurm"] = "local"
    """``local`` (embedded default) or ``slurm``."""
    slurm: SlurmConfig = field(default_factory=SlurmConfig)
    local: LocalConfig = field(default_factory=LocalConfig)


@dataclass(frozen=True, slots=True)
class Config:
    """The whole file. ``[detect]`` holds ``trainmedic.core.detect.config.DetectorConfig``'s
    keys (hang_k, hang_floor_s, straggler_ratio, ...: documented there)."""

    service: ServiceConfig = field(default_factory=ServiceConfig)
    watch: WatchConfig = field(default_factory=WatchConfig)
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    detect: DetectorConfig = field(default_factory=DetectorConfig)
    scheduler: SchedulerConfig = field(default_factory=SchedulerConfig)
    api: ApiConfig = field(default_factory=ApiConfig)

    def acts_on(self, job_id: str, *, partition: str = "") -> bool:
        """True when advice for this job is carried out (action mode and allowlisted)."""
        return self.service.mode == "action" and self.watch.action_allowed(
            job_id, partition=partition
        )
