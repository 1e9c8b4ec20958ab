"""Config: defaults, strict keys and types, environment resolution, per-job overrides."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from trainmedic.core.errors import ConfigError
from trainmedic.core.model import Category
from trainmedic.service.config import (
    Config,
    PolicyConfig,
    apply_policy_overrides,
    default_config,
    load_config,
)
from trainmedic.service.config.sections import ServiceConfig

ENV = {"HOME": "/home/u"}


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "tm.toml"
    path.write_text(text)
    return path


def test_defaults() -> None:
    config = default_config(ENV)
    assert config.service.mode == "monitor"
    assert config.service.poll_interval_s == 0.5
    assert (config.service.api_host, config.service.api_port) == ("127.0.0.1", 8377)
    # Longer than a slow requeue (11-13 s from requeue to running in the Slurm lab).
    assert (config.watchdog.timeout_s, config.watchdog.embedded) == (120.0, True)
    assert config.sources.lookback_s == 600.0
    assert config.service.state_dir == "/home/u/.local/state/trainmedic"
    assert config.service.db_url == "sqlite:////home/u/.local/state/trainmedic/trainmedic.db"
    budget = config.policy.retry_budget
    assert [budget.for_category(c) for c in Category] == [5, 5, 5, 2, 2, 1, None, 3]
    assert config.policy.max_attempts_without_checkpoint == 3
    assert config.policy.stop_enforcement is False
    assert config.policy.max_drain_fraction == 0.25 and config.policy.drain_window_s == 3600
    # Real jobs report minutes apart and take minutes to start (see DetectorConfig).
    detect = config.detect
    assert (detect.hang_k, detect.hang_floor_s, detect.hang_margin_s) == (5.0, 300.0, 60.0)
    assert (detect.startup_grace_s, detect.log_timezone) == (1800.0, "local")
    assert config.scheduler.kind == "local"
    assert not config.acts_on("j1")


def test_empty_file_is_the_defaults(tmp_path: Path) -> None:
    assert load_config(write(tmp_path, ""), ENV) == default_config(ENV)


def test_full_file(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
[service]
mode = "action"
poll_interval_s = 1      # an integer is a fine number
state_dir = "/var/lib/tm"
api_token = "s3cret"

[watch]
partitions = ["gpu"]
action_jobs = ["42"]

[policy]
stop_enforcement = true
[policy.retry_budget]
hardware = 7

[detect]
hang_k = 4.5

[scheduler]
kind = "slurm"
[scheduler.slurm]
ssh_host = "head"
ssh_port = 2222
""",
    )
    config = load_config(path, ENV)
    assert config.service.mode == "action" and config.service.poll_interval_s == 1.0
    assert config.service.db_url == "sqlite:////var/lib/tm/trainmedic.db"
    assert config.service.api_token == "s3cret"
    assert config.watch.partitions == ("gpu",)
    assert config.policy.retry_budget.hardware == 7
    assert config.policy.retry_budget.unknown == 3
    assert config.detect.hang_k == 4.5
    assert (config.scheduler.slurm.ssh_host, config.scheduler.slurm.ssh_port) == ("head", 2222)
    assert config.acts_on("42") and not config.acts_on("43")


def test_unknown_key_names_file_path_and_valid_keys(tmp_path: Path) -> None:
    path = write(tmp_path, "[service]\npoll_s = 1\n")
    with pytest.raises(ConfigError) as info:
        load_config(path, ENV)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: unknown key 'service.poll_s'; valid keys: mode, ")
    for field in dataclasses.fields(ServiceConfig):
        assert field.name in message


def test_unknown_section_and_nested_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown key 'servce'; valid keys: service, watch"):
        load_config(write(tmp_path, "[servce]\n"), ENV)
    with pytest.raises(ConfigError, match=r"unknown key 'policy.retry_budget.gpu'; valid keys"):
        load_config(write(tmp_path, "[policy.retry_budget]\ngpu = 1\n"), ENV)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('[service]\npoll_interval_s = "fast"', "service.poll_interval_s must be a number"),
        ("[service]\napi_port = 80.5", "service.api_port must be an integer"),
        ("[service]\napi_port = true", "service.api_port must be an integer"),
        ('[service]\nmode = "act"', "service.mode must be one of 'monitor' | 'action'"),
        ("[policy]\nstop_enforcement = 1", "policy.stop_enforcement must be true or false"),
        ('[watch]\npartitions = "gpu"', "watch.partitions must be an array"),
        ("[watch]\njobs = [1]", r"watch.jobs\[0\] must be a string"),
        ("service = 3", "service must be a table"),
        ("[service]\npoll_interval_s = -1", "service.poll_interval_s must be > 0"),
        ("[policy]\nmax_drain_fraction = 2.0", "policy.max_drain_fraction must be in"),
        ('[watch]\nname_pattern = "("', "watch.name_pattern is not a valid regex"),
        ("[detect]\nstraggler_ratio = 0.5", "straggler_ratio must be > 1"),
    ],
)
def test_bad_types_and_values(tmp_path: Path, text: str, expected: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError, match=expected) as info:
        load_config(path, ENV)
    assert str(info.value).startswith(f"{path}: ") and "\n" not in str(info.value)


def test_unreadable_and_invalid_toml(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "missing.toml", ENV)
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(write(tmp_path, "[service\n"), ENV)


def test_environment_supplies_token_and_state_dir(tmp_path: Path) -> None:
    env = {"TRAINMEDIC_API_TOKEN": "tok", "TRAINMEDIC_STATE_DIR": "/srv/tm"}
    config = default_config(env)
    assert config.service.api_token == "tok"
    assert config.service.db_url == "sqlite:////srv/tm/trainmedic.db"
    in_file = load_config(write(tmp_path, '[service]\napi_token = "file"\n'), env)
    assert in_file.service.api_token == "file"


def test_watch_rules() -> None:
    every = Config().watch
    assert every.watches("1") and every.action_allowed("1")
    only_jobs = dataclasses.replace(every, jobs=("7",))
    assert only_jobs.watches("7") and not only_jobs.watches("8")
    filtered = dataclasses.replace(every, partitions=("gpu",), name_pattern="^train")
    assert filtered.watches("1", partition="gpu", name="train-llm")
    assert not filtered.watches("1", partition="cpu", name="train-llm")
    assert not filtered.watches("1", partition="gpu", name="eval")
    allow = dataclasses.replace(every, action_partitions=("gpu",))
    assert allow.action_allowed("1", partition="gpu") and not allow.action_allowed("1")


def test_policy_overrides() -> None:
    base = PolicyConfig()
    job = apply_policy_overrides(base, {"stop_enforcement": True, "retry_budget": {"storage": 0}})
    assert job.stop_enforcement and job.retry_budget.storage == 0
    assert job.retry_budget.hardware == 5
    assert base.stop_enforcement is False
    with pytest.raises(ConfigError, match=r"job policy: unknown key 'policy\.budget'"):
        apply_policy_overrides(base, {"budget": 1})
    with pytest.raises(ConfigError, match=r"policy\.drain_enabled must be true or false"):
        apply_policy_overrides(base, {"drain_enabled": "yes"})
