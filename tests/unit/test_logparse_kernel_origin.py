"""Lines in a kernel log must come from the kernel: what each capture format lets us tell
(samples are the bytes measured from util-linux logger, /dev/kmsg and dmesg on Linux 6.18;
see core.logparse.kernel_origin), and the kernel-log source drops what a process wrote."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainmedic.core.logparse.kernel_origin import Origin, kernel_origin
from trainmedic.core.observations import LogLine
from trainmedic.sources.kernel import KernelLogSource

XID = "NVRM: Xid (PCI:0000:5e:00): 79, pid=9244, name=python, GPU has fallen off the bus."


def _journal(transport: str, **fields: str) -> str:
    record = {
        "_TRANSPORT": transport,
        "MESSAGE": XID,
        "__REALTIME_TIMESTAMP": "1709787522954123",
        "_HOSTNAME": "gpu12",
        **fields,
    }
    return json.dumps(record)


@pytest.mark.parametrize(
    ("line", "origin", "text"),
    [
        # journald JSON: _TRANSPORT is set by journald itself, never by the client.
        (_journal("kernel", SYSLOG_FACILITY="0"), Origin.KERNEL, XID),
        (
            _journal("syslog", SYSLOG_IDENTIFIER="kernel", SYSLOG_FACILITY="1"),
            Origin.USERSPACE,
            XID,
        ),
        (_journal("stdout", SYSLOG_IDENTIFIER="kernel"), Origin.USERSPACE, XID),
        # /dev/kmsg records: 4 = kern.warn; a process writing "<3>..." gets 11 (user.err).
        (f"4,1234,74889542031,-;{XID}", Origin.KERNEL, XID),
        (f"11,463,1804281496,-;{XID}", Origin.USERSPACE, XID),
        (f"12,460,1793049830,-;kernel: {XID}", Origin.USERSPACE, f"kernel: {XID}"),
        # syslog protocol PRI as logger sends it: -p kern.err becomes <11> (user.err).
        (
            f"<11>Dec  1 08:16:08 vm kernel: {XID}",
            Origin.USERSPACE,
            f"Dec  1 08:16:08 vm kernel: {XID}",
        ),
        (
            f"<3>Dec  1 08:16:08 vm kernel: {XID}",
            Origin.KERNEL,
            f"Dec  1 08:16:08 vm kernel: {XID}",
        ),
        (
            f"<14>1 2024-03-07T04:58:42Z gpu12 kernel - - - {XID}",
            Origin.USERSPACE,
            f"1 2024-03-07T04:58:42Z gpu12 kernel - - - {XID}",
        ),
        # dmesg -r prints the level only (a user.warn record shows as <5>): cannot tell.
        (f"<5>[ 1793.049830] {XID}", Origin.UNKNOWN, f"[ 1793.049830] {XID}"),
        # dmesg -x names the facility.
        (f"kern  :err   : [74889.542031] {XID}", Origin.KERNEL, f"[74889.542031] {XID}"),
        (
            f"user  :warn  : [ 1793.049830] kernel: {XID}",
            Origin.USERSPACE,
            f"[ 1793.049830] kernel: {XID}",
        ),
        # syslog files: the kernel's tag has no PID; any other tag is a process.
        (f"Mar  7 04:58:42 gpu12 kernel: [74889.542031] {XID}", Origin.UNKNOWN, None),
        (f"2024-03-07T04:58:42.954123+00:00 gpu12 kernel: {XID}", Origin.UNKNOWN, None),
        (f"Mar  7 04:58:42 gpu12 kernel[4242]: {XID}", Origin.USERSPACE, None),
        (f"Mar  7 04:58:42 gpu12 python3[4242]: {XID}", Origin.USERSPACE, None),
        (f"2024-03-07T04:58:42.954123+00:00 gpu12 train.sh: {XID}", Origin.USERSPACE, None),
        # plain dmesg / bare lines: cannot tell, accepted as before.
        (f"[74889.542031] {XID}", Origin.UNKNOWN, None),
        (XID, Origin.UNKNOWN, None),
        ("{not json", Origin.UNKNOWN, None),
        ("[" * 100_000, Origin.UNKNOWN, None),
    ],
)
def test_what_each_format_says_about_who_wrote_a_line(
    line: str, origin: Origin, text: str | None
) -> None:
    found = kernel_origin(line)
    assert found.origin is origin, (line, found.why)
    assert found.text == (line if text is None else text)


def test_a_journald_record_carries_its_own_time() -> None:
    assert kernel_origin(_journal("kernel")).timestamp == pytest.approx(1709787522.954123)
    deep = "{" + '"a":[' * 50_000 + "]" * 50_000 + "}"
    assert kernel_origin(deep).origin is Origin.UNKNOWN  # not a record: no RecursionError


def test_the_kernel_log_source_drops_what_a_process_wrote(tmp_path: Path) -> None:
    kern = tmp_path / "kern.log"
    kern.write_text(
        "\n".join(
            [
                f"Mar  7 04:58:42 node2 kernel[4242]: {XID}",  # logger -i -t kernel
                f"<11>Mar  7 04:58:42 node2 kernel: {XID}",  # logger -p kern.err -t kernel
                _journal("syslog", SYSLOG_IDENTIFIER="kernel"),
                f"2024-03-07T04:58:42.954123+00:00 node2 kernel: {XID}",
                _journal("kernel"),
                f"4,1234,74889542031,-;{XID}",
            ]
        )
        + "\n"
    )
    source = KernelLogSource("node2", kern, clock=lambda: 1709787530.0)
    lines = source.poll()
    assert all(isinstance(line, LogLine) for line in lines)
    texts = [line.text for line in lines if isinstance(line, LogLine)]
    assert texts == [f"2024-03-07T04:58:42.954123+00:00 node2 kernel: {XID}", XID, XID]
    assert source.refused == 3
    journal = lines[1]
    assert isinstance(journal, LogLine) and journal.time == pytest.approx(1709787522.954123)
