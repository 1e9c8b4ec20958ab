"""Mechanisms batch06 taught, each tested on lines in other shapes than the batch's (other
libraries, tools and wordings of the same mechanism), with healthy counter-cases that must stay
"no failure".

NCCL's set-up read by phase: a log that holds only the library's opening lines (version,
environment, the interface it picked) is an excerpt of a start, not a wait inside set-up; a
communicator that was torn down cleanly or carried a benchmark's rows was set up.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from trainmedic.core.model import Category, Kind, Verdict
from trainmedic.offline.analyze import analyze_path


def _verdict(tmp_path: Path, text: str) -> Verdict:
    path = tmp_path / "job.log"
    path.write_text(text)
    return analyze_path(path).verdict


HEALTHY: dict[str, str] = {
    "rccl_opening_lines_only": (
        "node-a:1201:1201 [0] NCCL INFO RCCL version 2.18.3+hip6.0\n"
        "node-a:1201:1201 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to ens1\n"
        "node-a:1201:1201 [0] NCCL INFO NET/Socket : Using [0]ens1:10.0.0.5<0>\n"
        "node-b:2202:2202 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to ens1\n"
        "node-b:2202:2202 [0] NCCL INFO NET/Socket : Using [0]ens1:10.0.0.6<0>\n"
    ),
    "nccl_plugin_fallback_then_nothing": (
        "host1:77:77 [3] NCCL INFO Bootstrap : Using eth0:192.168.1.3<0>\n"
        "host1:77:77 [3] NCCL INFO NET/Plugin: Failed to find ncclNetPlugin_v8 symbol.\n"
        "host1:77:77 [3] NCCL INFO cudaDriverVersion 12040\n"
    ),
    "all_gather_rows_and_clean_teardown": (
        "     1048576        262144     float    none      -1    41.20   25.45   22.27      0"
        "    40.80   25.70   22.49      0\n"
        "gpu3:9911:9930 [0] NCCL INFO comm 0x7f00aa00 rank 0 nranks 8 cudaDev 0 busId 1b000 "
        "- Destroy COMPLETE\n"
        "gpu3:9911:9931 [1] NCCL INFO comm 0x7f00ab00 rank 1 nranks 8 cudaDev 1 busId 1c000 "
        "- Destroy COMPLETE\n"
        "# Avg bus bandwidth    : 21.3\n"
    ),
}


@pytest.mark.parametrize("name", sorted(HEALTHY))
def test_healthy_output_is_no_failure(tmp_path: Path, name: str) -> None:
    assert _verdict(tmp_path, HEALTHY[name]).kind is Kind.NONE


def test_log_ending_among_channel_setup_is_still_a_hang(tmp_path: Path) -> None:
    text = (
        "n1:10:10 [0] NCCL INFO NCCL_IB_HCA set to mlx5_0\n"
        "n1:10:40 [0] NCCL INFO comm 0x55aa rank 0 nranks 16 cudaDev 0 busId 7000 - Init START\n"
        "n1:10:40 [0] NCCL INFO Channel 00/02 :    0   1   2   3\n"
        "n1:10:40 [0] NCCL INFO Channel 00/0 : 0[7000] -> 1[8000] via P2P/IPC\n"
    )
    verdict = _verdict(tmp_path, text)
    assert verdict.kind is Kind.HANG
    assert verdict.category is Category.SYSTEM_SOFTWARE
