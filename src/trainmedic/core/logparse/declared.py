"""A job's own progress format, declared as a regular expression (``progress_regex``).

trainmedic recognises the progress lines of common trainers (``logparse.progress``); a job
whose lines it does not know declares them in its opt-in (``"progress_regex"`` in the Slurm
comment's ``trainmedic`` object, or ``[watch] progress_regex`` in the config) with named
groups:

* ``iter`` (required): the training iteration (global step), digits;
* ``loss`` (optional): the loss, a number;
* ``step_time`` (optional): seconds per iteration, a number.

The expression is searched in the whole line as the job wrote it (prefixes included). Once a
job declares a format, only lines that match it are progress: resume, checkpoint and config
lines that happen to contain "iteration 400" no longer count as training steps.
"""

from __future__ import annotations

import re

from trainmedic.core.errors import ConfigError
from trainmedic.core.logparse.progress import ProgressLine

GROUPS = ("iter", "loss", "step_time")
MAX_PATTERN_CHARS = 500


def compile_progress_regex(text: str, source: str = "progress_regex") -> re.Pattern[str]:
    """The compiled expression; ConfigError (one line, saying what to write) when unusable."""
    if not isinstance(text, str) or not text:
        raise ConfigError(f"{source}: must be a non-empty string (a regular expression)")
    if len(text) > MAX_PATTERN_CHARS:
        raise ConfigError(f"{source}: longer than {MAX_PATTERN_CHARS} characters")
    try:
        pattern = re.compile(text)
    except re.error as exc:
        raise ConfigError(f"{source}: not a valid regular expression: {exc}") from None
    if "iter" not in pattern.groupindex:
        raise ConfigError(
            f"{source}: needs a named group (?P<iter>\\d+) for the iteration, e.g. "
            r'"step=(?P<iter>\d+) loss=(?P<loss>[-\d.eE]+)"'
        )
    unknown = sorted(set(pattern.groupindex) - set(GROUPS))
    if unknown:
        raise ConfigError(
            f"{source}: unknown named group(s) {', '.join(unknown)} (known: {', '.join(GROUPS)})"
        )
    return pattern


def parse_declared(pattern: re.Pattern[str], line: str) -> ProgressLine | None:
    """The progress ``line`` reports in the declared format, or None."""
    m = pattern.search(line)
    if m is None:
        return None
    try:
        iteration = int(m.group("iter"))
    except (TypeError, ValueError):
        return None
    return ProgressLine(
        iteration=iteration,
        loss=_number(m, "loss"),
        step_time=_number(m, "step_time"),
    )


def _number(m: re.Match[str], group: str) -> float | None:
    if group not in m.re.groupindex:
        return None
    text = m.group(group)
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        return None
