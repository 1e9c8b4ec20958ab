"""trainmedic's own exception hierarchy (after httpx): adapters translate lower-level errors
(subprocess, sqlite, HTTP, OS) into these at their border, so callers catch what they mean."""

from __future__ import annotations


class TrainmedicError(Exception):
    """Base of every error trainmedic raises on purpose."""


class ConfigError(TrainmedicError):
    """A config file or job policy is invalid (unknown key, wrong type, bad value)."""


class InputError(TrainmedicError):
    """An input (log file, directory, corpus) cannot be read."""


class SchedulerError(TrainmedicError):
    """A scheduler command failed or its output could not be parsed."""


class JobNotRequeueable(SchedulerError):
    """The job is over for good (completed, or cancelled by its user) or unknown to the
    scheduler: requeuing it by id would revive a finished job. Not worth another try."""


class SchedulerUnavailable(SchedulerError):
    """The scheduler could not be reached: data is stale, not a failure verdict."""


class StoreError(TrainmedicError):
    """The state store failed."""
