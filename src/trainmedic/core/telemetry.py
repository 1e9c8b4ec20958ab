"""Pure: GPU telemetry changes between scrapes -> Events with a system evidence source.

* ``DCGM_FI_DEV_XID_ERRORS`` holds the *last* Xid: a new non-zero value is an Xid event whose
  category, action hint and strength come from the signature catalogue's Xid table;
* a DBE ECC counter that grows, or a row-remap failure flag that turns on: strong GPU hardware;
* an NVLink error counter that grows: GPU interconnect trouble, not strong on its own (CRC
  errors can be transient).

The first value seen for a (node, GPU, metric) is a baseline, not news: a service that starts
(or restarts) next to an old Xid must not blame a healthy job for it. Pass
``first_sight_is_new=True`` to count it anyway.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from trainmedic.core.model import ActionHint, Category, Event, EvidenceSource, Kind, Role
from trainmedic.core.observations import TelemetrySample

XID = "DCGM_FI_DEV_XID_ERRORS"  # gauge: the last Xid seen (0: none)
DBE_VOLATILE = "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"
DBE_AGGREGATE = "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL"
ROW_REMAP_FAILURE = "DCGM_FI_DEV_ROW_REMAP_FAILURE"
NVLINK_ERRORS = (
    "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
    "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL",
    "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL",
    "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL",
)
THERMAL_VIOLATION = "DCGM_FI_DEV_THERMAL_VIOLATION"
GPU_TEMP = "DCGM_FI_DEV_GPU_TEMP"
WATCHED = frozenset(
    {
        XID,
        DBE_VOLATILE,
        DBE_AGGREGATE,
        ROW_REMAP_FAILURE,
        THERMAL_VIOLATION,
        GPU_TEMP,
        *NVLINK_ERRORS,
    }
)

TelemetryKey = tuple[str, str, str]
"""(node, gpu, metric)"""


def remember(
    previous: Mapping[TelemetryKey, float], samples: Iterable[TelemetrySample]
) -> dict[TelemetryKey, float]:
    """``previous`` updated with the latest value of each sample (a new dict)."""
    latest = dict(previous)
    for s in samples:
        latest[(s.node, s.gpu, s.metric)] = s.value
    return latest


def telemetry_to_events(
    samples: Iterable[TelemetrySample],
    previous: Mapping[TelemetryKey, float],
    *,
    first_sight_is_new: bool = False,
) -> list[Event]:
    events: list[Event] = []
    for s in samples:
        before = previous.get((s.node, s.gpu, s.metric))
        if before is None and not first_sight_is_new:
            continue
        base = 0.0 if before is None else before
        if s.metric == XID:
            if s.value != base and s.value > 0:
                events.append(_xid_event(s))
        elif s.metric in (DBE_VOLATILE, DBE_AGGREGATE):
            if s.value > base:
                events.append(
                    _event(
                        s,
                        "dcgm.ecc_dbe",
                        f"{s.value - base:g} new double-bit ECC error(s)",
                        ActionHint.RESET_GPU,
                        strong=True,
                    )
                )
        elif s.metric == ROW_REMAP_FAILURE:
            if s.value > 0 and base == 0:
                events.append(
                    _event(
                        s,
                        "dcgm.row_remap_failure",
                        "row remapping failed",
                        ActionHint.CONTACT_SUPPORT,
                        strong=True,
                    )
                )
        elif s.metric in NVLINK_ERRORS and s.value > base:
            events.append(
                _event(
                    s,
                    "dcgm.nvlink_errors",
                    f"{s.value - base:g} new NVLink error(s)",
                    ActionHint.CHECK_NETWORK,
                    strong=False,
                )
            )
    return events


def _event(
    s: TelemetrySample,
    signature: str,
    what: str,
    hint: ActionHint,
    *,
    strong: bool,
    category: Category = Category.GPU_HARDWARE,
    kind: Kind = Kind.CRASH,
    role: Role = Role.PRIMARY,
    xid: int | None = None,
) -> Event:
    return Event(
        signature=signature,
        category=category,
        kind=kind,
        role=role,
        line=0,  # not from a file: there is no line number
        text=f"{s.metric}{{gpu={s.gpu}}} = {s.value:g} on {s.node}: {what}",
        source=f"dcgm:{s.node}",
        evidence=EvidenceSource.GPU_TELEMETRY,
        timestamp=s.time,
        node=s.node,
        gpu=s.gpu or None,
        xid=xid,
        action_hint=hint,
        strong=strong,
    )


def _xid_event(s: TelemetrySample) -> Event:
    xid = int(s.value)
    try:
        from trainmedic.core.signatures.catalogue import load_catalogue
    except ImportError:  # TODO(A1): drop once the signature catalogue is in every install
        strong = xid in (79, 48)
        hint = ActionHint.REBOOT_NODE if xid == 79 else ActionHint.CONTACT_SUPPORT
        return _event(s, "dcgm.xid", f"Xid {xid}", hint, strong=strong, xid=xid)
    rule = load_catalogue().xid_rule(xid)
    return _event(
        s,
        "dcgm.xid",
        f"Xid {xid} ({rule.name})",
        rule.action_hint,
        strong=rule.strong,
        category=rule.category,
        kind=rule.kind,
        role=rule.role,
        xid=xid,
    )
