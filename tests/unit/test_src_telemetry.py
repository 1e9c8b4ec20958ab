"""telemetry_to_events: pure rules over consecutive scrapes."""

from __future__ import annotations

from trainmedic.core.model import Category
from trainmedic.core.observations import TelemetrySample
from trainmedic.core.telemetry import (
    DBE_VOLATILE,
    GPU_TEMP,
    NVLINK_ERRORS,
    ROW_REMAP_FAILURE,
    XID,
    remember,
    telemetry_to_events,
)
from trainmedic.sources.dcgm import parse_exposition


def sample(metric: str, value: float, gpu: str = "0") -> TelemetrySample:
    return TelemetrySample(time=10.0, node="n1", gpu=gpu, metric=metric, value=value)


def test_changes_become_events_and_steady_values_do_not() -> None:
    before = remember(
        {},
        [
            sample(XID, 0),
            sample(DBE_VOLATILE, 1),
            sample(ROW_REMAP_FAILURE, 0),
            sample(NVLINK_ERRORS[0], 5),
            sample(GPU_TEMP, 40),
        ],
    )
    steady = [sample(XID, 0), sample(DBE_VOLATILE, 1), sample(GPU_TEMP, 90)]
    assert telemetry_to_events(steady, before) == []
    changed = [
        sample(XID, 48),
        sample(DBE_VOLATILE, 2),
        sample(ROW_REMAP_FAILURE, 1),
        sample(NVLINK_ERRORS[0], 9),
    ]
    events = {e.signature: e for e in telemetry_to_events(changed, before)}
    assert set(events) == {
        "dcgm.xid",
        "dcgm.ecc_dbe",
        "dcgm.row_remap_failure",
        "dcgm.nvlink_errors",
    }
    assert events["dcgm.xid"].xid == 48 and events["dcgm.xid"].strong
    assert events["dcgm.ecc_dbe"].strong and events["dcgm.row_remap_failure"].strong
    assert not events["dcgm.nvlink_errors"].strong
    assert all(e.category is Category.GPU_HARDWARE and e.node == "n1" for e in events.values())


def test_an_unimportant_xid_is_not_strong() -> None:
    (event,) = telemetry_to_events([sample(XID, 63)], remember({}, [sample(XID, 0)]))
    assert event.xid == 63 and not event.strong


def test_first_sight_can_count_as_new() -> None:
    assert telemetry_to_events([sample(XID, 79)], {}) == []
    (event,) = telemetry_to_events([sample(XID, 79)], {}, first_sight_is_new=True)
    assert event.xid == 79


def test_parse_exposition_reads_gpu_labels_and_skips_others() -> None:
    text = (
        "# HELP DCGM_FI_DEV_ECC_DBE_VOL_TOTAL Total number of double-bit volatile ECC errors.\n"
        "# TYPE DCGM_FI_DEV_ECC_DBE_VOL_TOTAL counter\n"
        'DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{UUID="GPU-abc",Hostname="n1"} 3\n'
        "# TYPE DCGM_FI_DEV_SM_CLOCK gauge\n"
        'DCGM_FI_DEV_SM_CLOCK{gpu="0"} 1410\n'
        'DCGM_FI_DEV_GPU_TEMP{pci_bus_id="00000000:3B:00.0"} 41\n'
    )
    got = parse_exposition(text, "n1", 5.0)
    assert [(s.metric, s.gpu, s.value) for s in got] == [
        (DBE_VOLATILE, "GPU-abc", 3.0),
        (GPU_TEMP, "00000000:3B:00.0", 41.0),
    ]
