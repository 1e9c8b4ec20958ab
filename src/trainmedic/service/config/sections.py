"""The sections of the service's TOML config file: one frozen dataclass per table.

Every key is documented on its field. ``trainmedic.service.config.loader`` builds these from TOML
and rejects unknown keys and wrong types; the ``__post_init__`` checks reject bad values.
Paths shown as ``a.b`` are TOML key paths (``[a]`` table, ``b`` key).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from trainmedic.core.attribute.hook import HookConfig
from trainmedic.core.detect.config import DetectorConfig
from trainmedic.core.errors import ConfigError
from trainmedic.core.logparse.declared import compile_progress_regex
from trainmedic.core.policy.config import PolicyConfig, positive
from trainmedic.sources.lines import resolve_timezone

DEFAULT_API_PORT = 8377
DB_FILE_NAME = "trainmedic.db"
MAX_SOURCE_WORKERS = 64


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
    unwatch_after_s: float = 300.0
    """A job that ended (or that the scheduler no longer knows) and has no advice in progress
    is unwatched this long after: its files are closed and its state dropped."""
    source_workers: int = 0
    """Processes that read and parse the watched jobs' log files beside the loop (each job
    is read by one). 0 = read in the loop's own process: enough for tens of jobs; give 1-4
    (and as many spare cores) to a service watching hundreds of jobs that log thousands of
    lines a second (``benchmarks/bench_soak.py``)."""

    def __post_init__(self) -> None:
        positive("service.poll_interval_s", self.poll_interval_s)
        positive("service.unwatch_after_s", self.unwatch_after_s)
        if not 0 <= self.source_workers <= MAX_SOURCE_WORKERS:
            raise ValueError(
                f"service.source_workers must be in 0..{MAX_SOURCE_WORKERS}, "
                f"got {self.source_workers}"
            )
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
class SourcesConfig:
    """``[sources]``: how log files are read across restarts of the service."""

    lookback_s: float = 600.0
    """A log file the service has never read (a node's kern.log, a job's output) is read
    back only this far before the service started: older lines are history, not evidence.
    Files read before are resumed where the service left them, whatever their age."""

    def __post_init__(self) -> None:
        if not 0 <= self.lookback_s <= 7 * 86400:
            raise ValueError(f"sources.lookback_s must be in 0..604800, got {self.lookback_s}")


@dataclass(frozen=True, slots=True)
class WatchdogConfig:
    """``[watchdog]``: the fail-open guard that releases jobs trainmedic held too long."""

    embedded: bool = True
    """Run the watchdog inside ``trainmedic serve`` (restarted if it dies). ``false`` when it
    runs apart (``trainmedic watchdog``), e.g. on another host."""
    timeout_s: float = 120.0
    """A job held by trainmedic longer than this goes back to normal scheduling. Longer than
    a slow requeue (Slurm requeue to running took 11-13 s in the lab, ~130 s with the default
    ``cred_expire``; the hold itself lasts only while the exclusions are set)."""
    interval_s: float = 1.0
    """Seconds between two checks."""

    def __post_init__(self) -> None:
        positive("watchdog.timeout_s", self.timeout_s)
        positive("watchdog.interval_s", self.interval_s)


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
    progress_regex: str = ""
    """The progress lines of discovered jobs that declare none in their comment, as a regex
    with named groups ``iter`` (required), ``loss`` and ``step_time`` (optional); "" = the
    formats trainmedic knows (its trainer, Megatron, tqdm bars, HF log dicts with a step)."""

    def __post_init__(self) -> None:
        try:
            re.compile(self.name_pattern)
        except re.error as error:
            raise ValueError(f"watch.name_pattern is not a valid regex: {error}") from None
        if self.progress_regex:
            try:
                compile_progress_regex(self.progress_regex, "watch.progress_regex")
            except ConfigError as error:
                raise ValueError(str(error)) from None

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


NOTIFY_EVENTS = ("incident", "advice", "action")


@dataclass(frozen=True, slots=True)
class NotifyConfig:
    """``[notify]``: webhooks told of incidents, advice and actions (``service.notify``).

    Sending never blocks the service loop: a background thread drains a bounded queue and
    retries with exponential backoff; failures are counted in ``/metrics``
    (``trainmedic_webhook_failures_total``)."""

    slack_urls: tuple[str, ...] = ()
    """Incoming-webhook URLs that take Slack's JSON (``{"text": ...}``)."""
    json_urls: tuple[str, ...] = ()
    """URLs that take trainmedic's generic JSON (``{"event", "time", "job_id", ...}``)."""
    events: tuple[str, ...] = NOTIFY_EVENTS
    """Which events to send: any of "incident", "advice", "action"."""
    queue_size: int = 1000
    """Messages waiting to be sent; when full, new ones are dropped (and counted)."""
    retries: int = 4
    """Further tries after a failed send."""
    backoff_s: float = 1.0
    """Wait before the first retry; doubled for each further one (at most 60 s)."""
    timeout_s: float = 5.0
    """Seconds for one HTTP request."""

    def __post_init__(self) -> None:
        unknown = sorted(set(self.events) - set(NOTIFY_EVENTS))
        if unknown:
            raise ValueError(f"notify.events: unknown {unknown}; choose from {NOTIFY_EVENTS}")
        for url in (*self.slack_urls, *self.json_urls):
            if not url.startswith(("http://", "https://")):
                raise ValueError(f"notify: {url!r} is not an http(s) URL")
        if self.queue_size < 1 or self.retries < 0:
            raise ValueError("notify.queue_size must be >= 1 and notify.retries >= 0")
        positive("notify.backoff_s", self.backoff_s)
        positive("notify.timeout_s", self.timeout_s)


@dataclass(frozen=True, slots=True)
class TelemetryConfig:
    """``[telemetry]``: GPU health from a DCGM exporter on each node of a watched job.

    Xid, double-bit ECC, row-remap failure and NVLink error fields are evidence from a system
    source, as the kernel log is (a strong one may justify draining the node). An endpoint
    that does not answer makes that node's telemetry "unknown", never an incident. With
    neither key set, no telemetry is scraped."""

    dcgm_url_template: str = ""
    """Each node's exporter URL with ``{node}`` for the node name, e.g.
    "http://{node}:9400/metrics" (dcgm-exporter's default port); "" = none."""
    dcgm_urls: dict[str, str] = field(default_factory=dict)
    """Per-node URLs (``[telemetry.dcgm_urls]`` node1 = "http://..."), before the template."""
    scrape_interval_s: float = 10.0
    """Seconds between two scrapes of a node (dcgm-exporter refreshes every 30 s by default)."""
    timeout_s: float = 2.0
    """Limit of one scrape; scrapes run in a thread of their own, never in the loop."""

    def __post_init__(self) -> None:
        positive("telemetry.scrape_interval_s", self.scrape_interval_s)
        positive("telemetry.timeout_s", self.timeout_s)
        if self.dcgm_url_template and "{node}" not in self.dcgm_url_template:
            raise ValueError(
                f"telemetry.dcgm_url_template must contain {{node}}, got {self.dcgm_url_template!r}"
            )

    @property
    def enabled(self) -> bool:
        return bool(self.dcgm_url_template or self.dcgm_urls)

    def url_of(self, node: str) -> str | None:
        if node in self.dcgm_urls:
            return self.dcgm_urls[node]
        if self.dcgm_url_template:
            return self.dcgm_url_template.replace("{node}", node)
        return None


@dataclass(frozen=True, slots=True)
class Config:
    """The whole file. ``[detect]`` holds ``trainmedic.core.detect.config.DetectorConfig``'s
    keys (hang_k, hang_floor_s, log_timezone, straggler_ratio, ...: documented there)."""

    service: ServiceConfig = field(default_factory=ServiceConfig)
    watch: WatchConfig = field(default_factory=WatchConfig)
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    detect: DetectorConfig = field(default_factory=DetectorConfig)
    scheduler: SchedulerConfig = field(default_factory=SchedulerConfig)
    telemetry: TelemetryConfig = field(default_factory=TelemetryConfig)
    notify: NotifyConfig = field(default_factory=NotifyConfig)
    attribution_hook: HookConfig = field(default_factory=HookConfig)
    """``[attribution_hook]``: an external attribution command or endpoint (keys documented
    in ``trainmedic.core.attribute.hook.HookConfig``)."""
    sources: SourcesConfig = field(default_factory=SourcesConfig)
    watchdog: WatchdogConfig = field(default_factory=WatchdogConfig)
    api: ApiConfig = field(default_factory=ApiConfig)

    def __post_init__(self) -> None:
        resolve_timezone(self.detect.log_timezone)  # an unknown zone fails on load

    def acts_on(self, job_id: str, *, partition: str = "") -> bool:
        """True when advice for this job is carried out (action mode and allowlisted)."""
        return self.service.mode == "action" and self.watch.action_allowed(
            job_id, partition=partition
        )
