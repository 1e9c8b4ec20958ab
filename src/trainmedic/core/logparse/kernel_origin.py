"""Did a kernel-log line come from the kernel? What each format lets us tell.

A node's kernel log is trusted evidence (a strong line there may drain the node), so a line
that a user wrote with ``logger -t kernel "NVRM: Xid 79 ..."`` must not pass for the kernel's.
Measured here (util-linux 2.38, Linux 6.18): ``logger -p kern.err`` sends ``<11>`` (user.err,
it never sends the kern facility); a process writing ``<3>msg`` to ``/dev/kmsg`` gets a
``11,...`` record (the kernel forces the user facility), shown as ``user  :err`` by
``dmesg -x``; and the kernel's own lines never carry a PID. So:

=============================================  ==========================================  =====
format (how the log was captured)              from the kernel when                        else
=============================================  ==========================================  =====
journald JSON (``journalctl -o json``)         ``_TRANSPORT`` is ``kernel`` (a field only   user
                                               journald sets; ``SYSLOG_IDENTIFIER=kernel``
                                               is what ``logger -t kernel`` sets)
``/dev/kmsg`` records (``6,1234,5678,-;msg``)  facility (priority >> 3) is 0 (kern)        user
``<PRI>`` prefixed (RFC 3164/5424 as          facility (PRI >> 3) is 0 (kern)             user
received, rsyslog ``%PRI%`` templates)
``dmesg -x`` (``kern  :err   : msg``)          the facility column is ``kern``             user
``dmesg -r`` (``<5>[ 12.3] msg``)              cannot tell: the number is the level only    -
syslog file (``Mar  7 04:58:42 host TAG:``,    TAG is ``kernel`` (no ``[pid]``): the       user
ISO-dated ``RSYSLOG_FileFormat``)              format cannot tell it from ``logger -t
                                               kernel``; a ``kern.*``-only file (kern.log)
                                               never receives ``logger`` lines at all
plain lines (``dmesg``, ``[ 12.3] msg``)       cannot tell: accepted                        -
=============================================  ==========================================  =====

So point ``kernel_log_template`` at a ``kern.*``-only file, a journald JSON export or a
``/dev/kmsg`` capture: there a userspace line is either absent or recognised. A remote
syslog collector accepts any PRI a sending host claims; that is the collector's to secure.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from enum import StrEnum

_MAX_JSON = 64 * 1024  # a journald record longer than this is not one we parse


class Origin(StrEnum):
    KERNEL = "kernel"  # the format says the kernel wrote it
    USERSPACE = "userspace"  # the format says a process wrote it: never kernel evidence
    UNKNOWN = "unknown"  # the format cannot tell (accepted, as before)


@dataclass(frozen=True, slots=True)
class KernelLine:
    origin: Origin
    text: str  # the line to match (the message, when a structured format wraps it)
    timestamp: float | None = None  # wall time the format itself carries (journald)
    why: str = ""


_KMSG = re.compile(r"(\d{1,4}),\d{1,20},\d{1,20},[^;]{0,16};")
_PRI = re.compile(r"<(\d{1,3})>")
_DMESG_X = re.compile(
    r"(kern|user|mail|daemon|auth|syslog|lpr|news|uucp|cron|authpriv|ftp|local[0-7]) *:"
    r"(emerg|alert|crit|err|warn|notice|info|debug) *: ?"
)
_SYSLOG_HEAD = re.compile(
    r"(?:[A-Z][a-z]{2} {1,2}\d{1,2} \d\d:\d\d:\d\d(?:\.\d+)?"
    r"|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)?)"
    r" [\w.-]{1,255} ([^\s:\[]{1,64})(\[\d{1,10}\])?: "
)


def _facility(priority: int, where: str, text: str) -> KernelLine:
    if priority >> 3 == 0:
        return KernelLine(Origin.KERNEL, text, why=f"{where} facility kern")
    return KernelLine(Origin.USERSPACE, text, why=f"{where} facility {priority >> 3}, not kern")


def _journal(line: str) -> KernelLine | None:
    if len(line) > _MAX_JSON:
        return None
    try:
        record = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if not isinstance(record, dict) or "MESSAGE" not in record:
        return None
    message = record["MESSAGE"]
    text = message if isinstance(message, str) else ""
    stamp: float | None = None
    realtime = record.get("__REALTIME_TIMESTAMP")
    if isinstance(realtime, str) and realtime.isdigit() and len(realtime) <= 20:
        stamp = int(realtime) / 1e6
    transport = record.get("_TRANSPORT")
    if transport == "kernel":
        return KernelLine(Origin.KERNEL, text, stamp, "journald _TRANSPORT=kernel")
    return KernelLine(
        Origin.USERSPACE, text, stamp, f"journald _TRANSPORT={str(transport)[:20]}, not kernel"
    )


def kernel_origin(line: str) -> KernelLine:
    """Classify one line of a node's kernel log (see the table above)."""
    if line.startswith("{"):
        found = _journal(line)
        if found is not None:
            return found
    m = _KMSG.match(line)
    if m:
        return _facility(int(m.group(1)), "/dev/kmsg", line[m.end() :])
    m = _PRI.match(line)
    if m:
        text = line[m.end() :]
        if text.startswith("["):
            # ``dmesg -r``: the number is the level alone, a process's line included (a
            # user.warn record printed as <5>, measured): the facility is not there.
            return KernelLine(Origin.UNKNOWN, text, why="dmesg -r: level only")
        return _facility(int(m.group(1)), "<PRI>", text)
    m = _DMESG_X.match(line)
    if m:
        text = line[m.end() :]
        if m.group(1) == "kern":
            return KernelLine(Origin.KERNEL, text, why="dmesg -x facility kern")
        return KernelLine(Origin.USERSPACE, text, why=f"dmesg -x facility {m.group(1)}")
    m = _SYSLOG_HEAD.match(line)
    if m:
        tag, pid = m.group(1), m.group(2)
        if tag == "kernel" and pid is None:
            return KernelLine(Origin.UNKNOWN, line, why="syslog tag kernel")
        return KernelLine(
            Origin.USERSPACE, line, why=f"syslog tag {tag}{pid or ''}: a process, not the kernel"
        )
    return KernelLine(Origin.UNKNOWN, line)
