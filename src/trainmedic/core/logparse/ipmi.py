"""The BMC's system event log (``ipmitool sel elist`` / ``sel list``): hardware records.

A record reads ``id | date | time | sensor | event | Asserted``; the sensor type says which
part of the node it is about and the event how bad. Only asserted failures count (a
``Deasserted`` record is a recovery; informational sensors such as firmware progress or
``System Event`` say nothing about a failure). Corrected memory errors are context: a DIMM
wearing out, not yet a failure. Vendor one-line formats without the table (Supermicro's
"... - Assertion", HPE's "LOG: Uncorrectable Machine Check") are catalogue entries (sig_bmc).
"""

from __future__ import annotations

from trainmedic.core.logparse.structured import Finding
from trainmedic.core.model import ActionHint, Category, Kind, Role

# sensor-type words (lower case) -> category of a failure recorded for them
SENSORS: tuple[tuple[str, Category], ...] = (
    ("memory", Category.NODE_HARDWARE),
    ("dimm", Category.NODE_HARDWARE),
    ("processor", Category.NODE_HARDWARE),
    ("cpu", Category.NODE_HARDWARE),
    ("power supply", Category.NODE_HARDWARE),
    ("power unit", Category.NODE_HARDWARE),
    ("ps", Category.NODE_HARDWARE),
    ("critical interrupt", Category.NODE_HARDWARE),
    ("temperature", Category.NODE_HARDWARE),
    ("fan", Category.NODE_HARDWARE),
    ("watchdog", Category.NODE_HARDWARE),
    ("voltage", Category.NODE_HARDWARE),
    ("drive", Category.STORAGE),
    ("disk", Category.STORAGE),
)
FAILURE_EVENTS = (
    "uncorrectable",
    "multi-bit",
    "parity",
    "failure",
    "fault",
    "ierr",
    "caterr",
    "thermal trip",
    "machine check",
    "ac lost",
    "perr",
    "serr",
    "fatal",
    "critical going",
    "non-recoverable",
    "hard reset",
    "power cycle",
    "predictive",
    "transition to critical",
)
CONTEXT_EVENTS = ("correctable ecc", "correctable memory", "logging limit")


def _sensor_category(sensor: str) -> Category | None:
    words = sensor.lower()
    for key, category in SENSORS:
        if key in words.split() or (len(key) > 3 and key in words):
            return category
    return None


class SelParser:
    triggers: tuple[str, ...] = ("Asserted",)

    __slots__ = ("active",)

    def __init__(self) -> None:
        self.active = False  # every record stands alone

    def feed(self, line_no: int, body: str) -> Finding | None:
        cells = [c.strip() for c in body.split("|")]
        if len(cells) < 5 or cells[-1] != "Asserted":
            return None
        sensor, event = cells[-3], cells[-2].lower()
        category = _sensor_category(sensor)
        if category is None:
            return None
        if any(word in event for word in FAILURE_EVENTS) and "correctable ecc" not in event.replace(
            "uncorrectable ecc", ""
        ):
            role, kind = Role.PRIMARY, Kind.CRASH
        elif any(word in event for word in CONTEXT_EVENTS):
            role, kind = Role.CONTEXT, Kind.NONE
        else:
            return None
        return Finding(
            signature="ipmi_sel.failure" if role is Role.PRIMARY else "ipmi_sel.corrected",
            category=category,
            kind=kind,
            role=role,
            line=line_no,
            text=body.strip(),
            action_hint=ActionHint.REBOOT_NODE if role is Role.PRIMARY else ActionHint.NONE,
        )
