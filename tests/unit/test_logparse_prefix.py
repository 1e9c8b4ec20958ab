"""Line prefixes as printed by torchrun, srun -l, NCCL, syslog, dmesg, glog and Python logging."""

from __future__ import annotations

import calendar

import pytest

from trainmedic.core.logparse.prefix import REFERENCE_YEAR, full_date_year, parse_prefix


def _utc(*parts: int) -> float:
    return float(calendar.timegm((*parts, 0, 0, 0)))


def body(line: str) -> str:
    return line[parse_prefix(line).body_start :]


def test_torch_rank_and_glog_stack() -> None:
    line = "[rank3]:[E1129 08:31:22.036611330 ProcessGroupNCCL.cpp:744] [Rank 3] Watchdog caught"
    p = parse_prefix(line)
    assert p.rank == 3
    assert p.timestamp == pytest.approx(_utc(REFERENCE_YEAR, 11, 29, 8, 31, 22) + 0.036611330)
    assert body(line).startswith("[Rank 3] Watchdog")


def test_glog_year_can_be_supplied() -> None:
    p = parse_prefix("[E307 05:30:20.5 ProcessGroupNCCL.cpp:758] x", year=2026)
    assert p.timestamp == pytest.approx(_utc(2026, 3, 7, 5, 30, 20) + 0.5)


def test_default_rank_prefix() -> None:
    p = parse_prefix("[default5]:RuntimeError: boom")
    assert (p.rank, body("[default5]:RuntimeError: boom")) == (5, "RuntimeError: boom")


def test_srun_label_then_nccl_prefix() -> None:
    line = "12: gpu-node-7:40211:40388 [4] NCCL INFO Channel 00/0 : 12[4] -> 13[5] via P2P"
    p = parse_prefix(line)
    assert (p.rank, p.node) == (12, "gpu-node-7")
    assert body(line).startswith("NCCL INFO Channel")


def test_mpirun_tag_and_nccl_prefix() -> None:
    p = parse_prefix("[7]gpu-3:83:2526 [0] misc/socket.cc:503 NCCL WARN Net : recv failed")
    assert (p.rank, p.node) == (7, "gpu-3")


def test_iso_timestamps_utc_and_zone() -> None:
    a = parse_prefix("2025-01-02 03:04:05,250 - INFO - step 3")
    b = parse_prefix("2025-01-02T04:04:05.250+01:00 step 3")
    c = parse_prefix("[2025-01-02 03:04:05,250] [INFO] [trainer] step 3")
    assert a.timestamp == pytest.approx(_utc(2025, 1, 2, 3, 4, 5) + 0.25)
    assert b.timestamp == pytest.approx(a.timestamp)
    assert c.timestamp == pytest.approx(a.timestamp)
    assert body("2025-01-02 03:04:05,250 - INFO - step 3") == "INFO - step 3"


def test_syslog_kernel_line_names_the_host() -> None:
    line = "Nov 29 08:31:22 gpu-node-7 kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=1234"
    p = parse_prefix(line)
    assert p.node == "gpu-node-7"
    assert p.timestamp == pytest.approx(_utc(REFERENCE_YEAR, 11, 29, 8, 31, 22))
    assert body(line).startswith("NVRM: Xid")


def test_dmesg_monotonic_stamp_is_not_a_date() -> None:
    line = "[74889.644138] NVRM: Xid (PCI:0000:02:00): 79, GPU has fallen off the bus."
    p = parse_prefix(line)
    assert p.timestamp is None
    assert body(line).startswith("NVRM: Xid")


def test_dmesg_human_date() -> None:
    p = parse_prefix("[Fri Nov 29 08:31:22 2024] NVRM: Xid (PCI:0000:02:00): 79")
    assert p.timestamp == pytest.approx(_utc(2024, 11, 29, 8, 31, 22))


def test_plain_lines_have_no_prefix() -> None:
    for line in ("0.0011818 0.5908513", "Traceback (most recent call last):", "", "[0]:"):
        assert parse_prefix(line).body_start == 0


def test_ucx_prefix_names_host() -> None:
    assert parse_prefix("[a1b2c3:3039 :0:3095] Caught signal 7 (Bus error)").node == "a1b2c3"


def test_full_date_year() -> None:
    assert full_date_year("[rank0]:2026-03-07 04:58:42,954 INFO x") == 2026
    assert full_date_year("Mar  7 04:58:42 host kernel: x") is None


def test_ray_worker_and_dateless_glog() -> None:
    line = (
        "(RayWorkerWrapper pid=4009, ip=10.0.0.5) [rank1]:[E ProcessGroupNCCL.cpp:563] [Rank 1] x"
    )
    p = parse_prefix(line)
    assert (p.rank, p.node) == (1, "10.0.0.5")
    assert body(line) == "[Rank 1] x"


def test_counter_before_rank_prefix() -> None:
    p = parse_prefix("[80746] [rank4]:[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] boom")
    assert p.rank == 4
