"""Result tables (batch11's two healthy logs called failures): a benchmark's header row is no
failure line though a column is named "error", and failure lines a result table followed did
not end the run. Tested on other tools' output than the batch's (nccl-tests, perftest, iperf,
OSU bandwidth, sacct), with counter-cases that must stay failures.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from log_verdict import verdict_of as _verdict

from trainmedic.core.logparse.evidence import is_failure_text
from trainmedic.core.logparse.results import is_header_row, is_result_row
from trainmedic.core.model import Kind

NCCL_TESTS_ROWS = (
    "     1048576        262144     float     sum    61.20   17.13   32.12      0    60.90"
    "   17.22   32.28      0\n"
    "     2097152        524288     float     sum    98.14   21.37   40.07      0    97.85"
    "   21.43   40.18      0\n"
)

HEADERS = {
    # nccl-tests' column row pasted without its "#"
    "nccl_tests_unmarked": "       size         count      type   redop    root     time   algbw"
    "   busbw  #wrong     time   algbw   busbw  error",
    "sacct_columns": "JobID           JobName  Partition    Account  AllocCPUS      State ExitCode",
    "a_tool_with_an_errors_column": "  Port    State    RxBytes    TxBytes    Errors    Drops",
}


@pytest.mark.parametrize("name", sorted(HEADERS))
def test_a_header_row_is_no_failure_line(name: str) -> None:
    assert is_header_row(HEADERS[name])
    assert not is_failure_text(HEADERS[name])


@pytest.mark.parametrize(
    "line",
    [
        "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1269, unhandled system error",
        "NCCL failure  common.cu  unhandled system error",  # three cells: a message
        "FAILED    FAILED    TIMEOUT    NODE_FAIL",  # a status row, not column names
        "Test failure  common.cu  393  rank  3",  # numbers: a message
    ],
)
def test_messages_in_columns_stay_failure_lines(line: str) -> None:
    assert not is_header_row(line)
    assert is_failure_text(line)


def test_result_rows() -> None:
    assert is_result_row(" 65536      5000           11775.45            11774.96   0.188399")
    assert is_result_row("[  5]   0.00-1.00   sec  1.10 GBytes  9.41 Gbits/sec    0")
    assert not is_result_row("3  ranks failed  2  times")


HEALTHY = {
    "perftest_after_a_probe_error": (
        "mlx5: mlx5_1: ERROR: failed to query port 2, skipping device\n"
        "---------------------------------------------------------------------------------------\n"
        " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n"
        " 65536      5000             11775.45            11774.96              0.188399\n"
        "---------------------------------------------------------------------------------------\n"
    ),
    "iperf_after_an_interface_error": (
        "error: unable to bind to device eth1, using the default route\n"
        "[ ID] Interval           Transfer     Bitrate         Retr\n"
        "[  5]   0.00-1.00   sec  1.10 GBytes  9.41 Gbits/sec    0\n"
        "[  5]   1.00-2.00   sec  1.09 GBytes  9.40 Gbits/sec    0\n"
    ),
    "osu_bandwidth_after_a_transport_error": (
        "[1700000000.1] [gpu3:4411:0]  uct_iface.c:120 UCX  ERROR  cuda_ipc: failed to open "
        "memory handle: invalid device context\n"
        "# OSU MPI Bandwidth Test v7.1\n"
        "# Size      Bandwidth (MB/s)\n"
        "1                       2.91\n"
        "2                       5.88\n"
    ),
    "nccl_tests_header_without_its_mark": (
        "       size         count      type   redop    root     time   algbw   busbw  error"
        "     time   algbw   busbw  error\n"
        "        (B)    (elements)                               (us)  (GB/s)  (GB/s)"
        "               (us)  (GB/s)  (GB/s)\n" + NCCL_TESTS_ROWS
    ),
}


@pytest.mark.parametrize("name", sorted(HEALTHY))
def test_a_run_that_measured_past_its_errors_is_healthy(tmp_path: Path, name: str) -> None:
    verdict = _verdict(tmp_path, HEALTHY[name])
    assert verdict.kind is Kind.NONE, (verdict.category, verdict.basis)


FAILURES = {
    # the error and then the table's header, but not one row: the run never measured
    "error_then_header_only": (
        "[1700000000.1] [gpu3:4411:0]  uct_iface.c:120 UCX  ERROR  cuda_ipc: failed to open "
        "memory handle: invalid device context\n"
        "# OSU MPI Bandwidth Test v7.1\n"
        "# Size      Bandwidth (MB/s)\n"
    ),
    # rows, then the failure: what ended the run is after its rows
    "rows_then_a_failure": (
        "       size         count      type   redop    root     time   algbw   busbw  error\n"
        + NCCL_TESTS_ROWS
        + "node07: Test NCCL failure common.cu:393 'unhandled system error'\n"
    ),
    # rows with no header are no result table
    "error_then_numbers_without_a_header": (
        "mlx5: mlx5_1: ERROR: failed to query port 2\n"
        " 65536      5000             11775.45            11774.96              0.188399\n"
    ),
}


@pytest.mark.parametrize("name", sorted(FAILURES))
def test_a_run_that_did_not_measure_past_its_errors_fails(tmp_path: Path, name: str) -> None:
    verdict = _verdict(tmp_path, FAILURES[name])
    assert verdict.kind is not Kind.NONE, verdict.basis
