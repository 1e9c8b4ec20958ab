"""Line prefixes: who printed a line and when, before the message itself.

Launchers and loggers stack prefixes in front of a message, e.g.
``[rank1]:[E307 05:30:20.036611330 ProcessGroupNCCL.cpp:744] [Rank 1] ...`` or
``3: node7:1234:1290 [3] NCCL INFO ...``, ``(RayWorkerWrapper pid=4009, ip=10.0.0.5) [rank1]:...``
or ``Mar  7 04:58:42 gpu12 kernel: NVRM: Xid ...``.
``parse_prefix`` peels them off one by one and returns rank, node, timestamp and where the
message starts.

Clock decisions (documented because attribution compares timestamps):

* ISO dates (``2024-03-07 04:58:42,954``, ``2024-03-07T04:58:42.954Z``) and ``dmesg -T`` dates
  are full dates. A stamp without a zone (Python logging's ``asctime``, syslog, glog) is
  wall-clock time in the zone ``tz`` (the service passes the log machine's zone, see
  ``[detect] log_timezone``); with no ``tz`` it is read as UTC, so two files of one job
  compare (``analyze``).
* syslog (``Mar  7 04:58:42``) and glog (``E0307 05:30:20.036``, torch's ``[E307 ...]``) carry
  no year. They are placed in ``year`` (default ``REFERENCE_YEAR``); ``analyze`` passes the
  year of the first full date it saw in the same input so that both clocks line up. A live
  source passes ``now`` instead: the stamp gets the year that puts it nearest to ``now``
  without being in the future (``YEARLESS_FUTURE_SLACK_S`` allows for the zone offset of a
  local-time stamp read as UTC), so a log read on 2 January keeps 31 December in the old year.
* kernel ``dmesg`` stamps (``[74889.542031]``) are seconds since boot: not a date, so the
  timestamp stays ``None`` and such lines are ordered by their position in the file.
"""

from __future__ import annotations

import calendar
import functools
import re
from datetime import UTC, datetime, tzinfo

from trainmedic.core.badinput import small_int
from trainmedic.core.model import LinePrefix

REFERENCE_YEAR = 2024
"""Year assumed for syslog/glog stamps when no full date is known (a leap year: Feb 29 parses)."""

YEARLESS_FUTURE_SLACK_S = 86400.0
"""With ``now``: a year-less stamp up to this far ahead of ``now`` (zones reach UTC+14) is
this year's, not last year's."""

_MONTHS = {name: i for i, name in enumerate(calendar.month_abbr) if name}

_RANK = re.compile(
    r"\[(?:rank|default)(\d+)\]:?\s*|\[(\d+)\](?=[^\s:\]])|\[(\d+),(\d+)\]<std(?:out|err)>:\s*"
)
_SRUN = re.compile(r"\s*(\d{1,5}): ")
_ISO = re.compile(
    r"\[?(\d{4})-(\d\d)-(\d\d)[ T_](\d\d):(\d\d):(\d\d)(?:[.,](\d+))?"
    r"(Z|[+-]\d\d:?\d\d)?\]?(?:\s*-\s*|:\s+|\s+|$)"
)
_SLASH_DATE = re.compile(r"\[(\d\d)/(\d\d)/(\d\d) (\d\d):(\d\d):(\d\d)\]\s*")
# The host is optional: a journal excerpt without it reads "Feb 23 03:28:16 kernel: mce: ...".
_SYSLOG = re.compile(
    r"([A-Z][a-z]{2}) {1,2}(\d{1,2}) (\d\d):(\d\d):(\d\d)(?:\.\d+)? +(?:(?!kernel: )([\w.-]+) +)?"
    r"(?:kernel: |[\w./-]+(?:\[\d+\])?: )?"
)
_DMESG_T = re.compile(
    r"\[[A-Z][a-z]{2} ([A-Z][a-z]{2}) {1,2}(\d{1,2}) (\d\d):(\d\d):(\d\d) (\d{4})\]\s*"
)
_DMESG = re.compile(r"\[\s*\+?\d+\.\d+\]\s*")
# The thread-id gap is bounded ({0,24}): "[ \d]*" followed by "[\w./-]+" split a long run of
# digits every way before failing (quadratic in the line).
_GLOG = re.compile(
    r"\[?([IWEF])(\d{1,2})(\d\d) (\d\d):(\d\d):(\d\d)(?:\.(\d{1,12}))?[ \d]{0,24}"
    r"(?:[\w./-]+:\d+)?\]\s*"
)
_GLOG_NODATE = re.compile(r"\[([IWEF]) [\w./-]+:\d+\]\s*")
_RAY = re.compile(r"\((?:\w+ )?pid=\d+(?:, ip=([\d.]+))?\)\s*")
_BARE_NUMBER = re.compile(r"\[\d+\]\s+(?=\[)")  # a line or pid counter before [rankN]
_NCCL = re.compile(r"([\w.-]+):(\d+):(\d+) \[(\d+)\] ")
_UCX = re.compile(r"\[([\w.-]+):(\d+) *:\d+:\d+\] ")
_KERNEL_TAG = re.compile(r"kernel: ")
# pdsh/clush put "host: " before each line; taken only before another known prefix or a kernel
# message, and only for host-like names (a digit or a hyphen), so "RuntimeError: " stays text.
_PDSH = re.compile(
    r"([A-Za-z][\w.-]*(?:\d|-)[\w.-]*): (?=\[(?:rank|default)\d|\d{1,5}: |\[[A-Z][a-z]{2} "
    r"|\[\s*\d+\.\d+\]|kernel: |NVRM: |[\w.-]+:\d+:\d+ \[\d+\] )"
)
# Every prefix the loop below peels; one match of all of them at once tells, in one call,
# that none starts here (the common case once a line's prefixes are off: its message).
_PEELED = (_RANK, _ISO, _SYSLOG, _DMESG_T, _DMESG, _KERNEL_TAG, _SLASH_DATE, _GLOG, _NCCL,
           _GLOG_NODATE, _BARE_NUMBER, _RAY, _UCX, _SRUN)  # fmt: skip
_ANY_PEELED = re.compile("|".join(f"(?:{p.pattern})" for p in _PEELED))


def _seconds(
    year: int, month: int, day: int, hh: int, mm: int, ss: int, frac: str | None
) -> float | None:
    if not 1 <= month <= 12 or not 1 <= day <= 31:
        return None
    base = _timegm(year, month, day, hh, mm, ss)
    if base is None:
        return None
    return base + (float("0." + frac) if frac else 0.0)


@functools.lru_cache(maxsize=4096)
def _iso_seconds(year: str, month: str, day: str, hh: str, mm: str, ss: str) -> float | None:
    """``_seconds`` of an ISO date's digits, memoised on them: the lines of a live log share
    their second, and this saves six ``int()`` and a ``timegm`` per line."""
    return _seconds(int(year), int(month), int(day), int(hh), int(mm), int(ss), None)


iso_seconds = _iso_seconds
"""The same, for ``plain`` (which reads the trainer's ISO stamps as ``parse_prefix`` does)."""


@functools.lru_cache(maxsize=4096)
def _timegm(year: int, month: int, day: int, hh: int, mm: int, ss: int) -> int | None:
    """Memoised: the lines of a live log share their second (a pure function of its args)."""
    try:
        return calendar.timegm((year, month, day, hh, mm, ss, 0, 0, 0))
    except (ValueError, OverflowError):
        return None


def _in_zone(stamp: float | None, tz: tzinfo | None) -> float | None:
    """A zone-less stamp parsed as UTC, read instead as wall-clock time in ``tz``."""
    if stamp is None or tz is None:
        return stamp
    wall = datetime.fromtimestamp(stamp, UTC).replace(tzinfo=tz)
    return wall.timestamp()


def _yearless(
    year: int, now: float | None, month: int, day: int, hh: int, mm: int, ss: int, frac: str | None
) -> float | None:
    """A stamp without a year: in ``year``, or with ``now`` in the latest year that does not
    put it more than the slack after ``now``."""
    if now is None:
        return _seconds(year, month, day, hh, mm, ss, frac)
    try:
        this_year = datetime.fromtimestamp(now, UTC).year
    except (OverflowError, OSError, ValueError):
        return None
    # Feb 29 exists one year in four: look back far enough to find one.
    for candidate in range(this_year + 1, this_year - 8, -1):
        if not 1 <= month <= 12 or day > calendar.monthrange(candidate, month)[1]:
            continue
        ts = _seconds(candidate, month, day, hh, mm, ss, frac)
        if ts is not None and ts <= now + YEARLESS_FUTURE_SLACK_S:
            return ts
    return None


def _zone_offset(zone: str | None) -> float:
    if not zone or zone == "Z":
        return 0.0
    sign = -1.0 if zone[0] == "-" else 1.0
    digits = zone[1:].replace(":", "")
    return sign * (int(digits[:2]) * 3600 + int(digits[2:4]) * 60)


MAX_PREFIX_CHARS = 1024
"""Characters of a line that can hold its prefixes: the regexes never see the rest, so a
64 KiB line of spaces or digits costs what a short one does."""


def parse_prefix(
    line: str,
    year: int = REFERENCE_YEAR,
    tz: tzinfo | None = None,
    *,
    now: float | None = None,
) -> LinePrefix:
    """Peel the stacked prefixes off ``line``; unknown text ends the prefix. Zone-less stamps
    are wall-clock time in ``tz`` (None: UTC). ``now`` (a live source's clock) chooses the year
    of year-less stamps; ``year`` is used without it."""
    line = line[:MAX_PREFIX_CHARS]
    rank: int | None = None
    node: str | None = None
    timestamp: float | None = None
    pos = 0
    # Each pass removes at most one prefix; eight is more than any real stack.
    m = _PDSH.match(line)
    if m:
        node, pos = m.group(1), m.end()
    any_peeled = _ANY_PEELED.match
    for _ in range(8):
        if any_peeled(line, pos) is None:
            break
        m = _RANK.match(line, pos)
        if m:
            if rank is None:
                rank = small_int(m.group(1) or m.group(2) or m.group(4))
            pos = m.end()
            continue
        m = _ISO.match(line, pos)
        if m:
            ts = _iso_seconds(*m.group(1, 2, 3, 4, 5, 6))
            if ts is not None and m.group(7):
                ts += float("0." + m.group(7))
            if ts is not None:
                if m.group(8) is None:
                    ts = _in_zone(ts, tz)
                else:
                    ts -= _zone_offset(m.group(8))
                timestamp = ts if timestamp is None else timestamp
                pos = m.end()
                continue
        m = _SYSLOG.match(line, pos)
        if m and m.group(1) in _MONTHS:
            ts = _yearless(year, now, _MONTHS[m.group(1)], int(m.group(2)), *_ints(m, 3, 5), None)
            timestamp = _in_zone(ts, tz) if timestamp is None else timestamp
            node = node or m.group(6)
            pos = m.end()
            continue
        m = _DMESG_T.match(line, pos)
        if m and m.group(1) in _MONTHS:
            ts = _seconds(
                int(m.group(6)), _MONTHS[m.group(1)], int(m.group(2)), *_ints(m, 3, 5), None
            )
            timestamp = _in_zone(ts, tz) if timestamp is None else timestamp
            pos = m.end()
            continue
        m = _DMESG.match(line, pos) or _KERNEL_TAG.match(line, pos)
        if m:
            pos = m.end()
            continue
        m = _SLASH_DATE.match(line, pos)
        if m:
            mo, d, yy = int(m.group(1)), int(m.group(2)), int(m.group(3))
            ts = _seconds(2000 + yy, mo, d, *_ints(m, 4, 6), None)
            timestamp = _in_zone(ts, tz) if timestamp is None else timestamp
            pos = m.end()
            continue
        m = _GLOG.match(line, pos)
        if m:
            ts = _yearless(year, now, int(m.group(2)), int(m.group(3)), *_ints(m, 4, 6), m.group(7))
            timestamp = _in_zone(ts, tz) if timestamp is None else timestamp
            pos = m.end()
            continue
        m = _NCCL.match(line, pos)
        if m:
            node = node or m.group(1)
            pos = m.end()
            continue
        m = _GLOG_NODATE.match(line, pos) or _BARE_NUMBER.match(line, pos)
        if m:
            pos = m.end()
            continue
        m = _RAY.match(line, pos)
        if m:
            node = node or m.group(1)
            pos = m.end()
            continue
        m = _UCX.match(line, pos)
        if m:
            node = node or m.group(1)
            pos = m.end()
            continue
        if pos == 0 or rank is None:
            m = _SRUN.match(line, pos)
            if m and rank is None:
                rank = int(m.group(1))
                pos = m.end()
                continue
        break
    return LinePrefix(rank=rank, node=node, timestamp=timestamp, body_start=pos)


def _ints(m: re.Match[str], first: int, last: int) -> tuple[int, int, int]:
    a, b, c = (int(g) for g in m.group(*range(first, last + 1)))
    return a, b, c


def full_date_year(line: str) -> int | None:
    """The year of a full date at the start of ``line`` (after rank prefixes), if any."""
    m = _RANK.match(line)
    pos = m.end() if m else 0
    m = _ISO.match(line, pos)
    return int(m.group(1)) if m else None
