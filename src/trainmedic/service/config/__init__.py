"""The service's configuration: a TOML file loaded into frozen dataclasses.

``load_config(path)`` reads and validates a file (unknown keys fail with the list of valid
ones, wrong types fail, both as one-line ``ConfigError`` naming the file and key path);
``default_config()`` gives every default. The sections and each key are documented in
``trainmedic.service.config.sections``. An example file::

    [service]
    mode = "action"              # "monitor" (default) records advice only
    api_port = 8377

    [watch]
    partitions = ["train"]
    action_jobs = ["1234"]

    [policy]
    stop_enforcement = true
    [policy.retry_budget]
    hardware = 5

    [detect]
    hang_k = 5.0
    log_timezone = "local"

    [telemetry]
    dcgm_url_template = "http://{node}:9400/metrics"

    [scheduler]
    kind = "slurm"
    [scheduler.slurm]
    ssh_host = "head01"
"""

from __future__ import annotations

from trainmedic.core.policy.config import PolicyConfig, RetryBudgets
from trainmedic.service.config.loader import (
    READ_TOKEN_ENV,
    STATE_DIR_ENV,
    TOKEN_ENV,
    apply_policy_overrides,
    default_config,
    load_config,
)
from trainmedic.service.config.sections import (
    ApiConfig,
    Config,
    LocalConfig,
    SchedulerConfig,
    ServiceConfig,
    SlurmConfig,
    SourcesConfig,
    TelemetryConfig,
    WatchConfig,
    WatchdogConfig,
)

__all__ = [
    "READ_TOKEN_ENV",
    "STATE_DIR_ENV",
    "TOKEN_ENV",
    "ApiConfig",
    "Config",
    "LocalConfig",
    "PolicyConfig",
    "RetryBudgets",
    "SchedulerConfig",
    "ServiceConfig",
    "SlurmConfig",
    "SourcesConfig",
    "TelemetryConfig",
    "WatchConfig",
    "WatchdogConfig",
    "apply_policy_overrides",
    "default_config",
    "load_config",
]
