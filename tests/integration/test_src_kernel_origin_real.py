"""A userspace line dressed as the kernel's, made by the real tools and read back through the
real capture formats, never reaches the engine as kernel evidence; the kernel's own records
in the same captures do.

- util-linux ``logger -t kernel`` (even ``-p kern.err``) over a real Unix datagram socket, its
  bytes stored as a syslog collector receives them;
- a process writing ``<3>kernel: NVRM: Xid ...`` to ``/dev/kmsg`` (as root may), read back as
  ``/dev/kmsg`` records and through ``dmesg -x``.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import uuid
from pathlib import Path

import pytest

from trainmedic.core.observations import LogLine
from trainmedic.sources.kernel import KernelLogSource

pytestmark = pytest.mark.slow

XID = "NVRM: Xid (PCI:0000:5e:00): 79, pid=9244, name=python, GPU has fallen off the bus."


def _read(kern: Path) -> tuple[list[str], int]:
    source = KernelLogSource("node1", kern)
    lines = [o.text for o in source.poll() if isinstance(o, LogLine)]
    return lines, source.refused


def test_logger_lines_are_refused_whatever_tag_and_priority(tmp_path: Path) -> None:
    logger = shutil.which("logger")
    if logger is None:
        pytest.skip("util-linux logger is not installed")
    path = str(tmp_path / "log.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(path)
        sock.settimeout(5)
        variants = (
            ["-t", "kernel"],
            ["-p", "kern.err", "-t", "kernel"],
            ["-i", "-t", "kernel"],
            ["--rfc3164", "-p", "kern.crit", "-t", "kernel"],
            ["--rfc5424", "-p", "kern.err", "-t", "kernel"],
        )
        received = []
        for args in variants:
            subprocess.run([logger, "-u", path, *args, XID], check=True, timeout=10)
            received.append(sock.recv(65536).decode())
    assert all(XID in line for line in received)
    kern = tmp_path / "kern.log"
    kern.write_text("".join(line.rstrip("\n") + "\n" for line in received))
    lines, refused = _read(kern)
    assert lines == [] and refused == len(variants), received


def test_kmsg_and_dmesg_tell_the_kernels_records_from_a_process_s(tmp_path: Path) -> None:
    marker = f"trainmedic-probe-{uuid.uuid4().hex[:8]}"
    try:
        with open("/dev/kmsg", "w") as kmsg:
            kmsg.write(f"<3>kernel: {XID} {marker}\n")  # a process claiming kern.err
    except OSError as error:
        pytest.skip(f"/dev/kmsg is not writable here: {error}")
    records: list[str] = []
    fd = os.open("/dev/kmsg", os.O_RDONLY | os.O_NONBLOCK)
    try:
        while True:
            try:
                records.append(os.read(fd, 65536).decode(errors="replace").rstrip("\n"))
            except BlockingIOError:
                break
            except OSError:  # EPIPE: a record overwritten while reading
                continue
    finally:
        os.close(fd)
    ours = [r for r in records if marker in r]
    kernel_own = [r for r in records if r.split(",", 1)[0].isdigit() and int(r.split(",")[0]) < 8]
    assert len(ours) == 1 and kernel_own, records[:5]
    kern = tmp_path / "kmsg.log"
    kern.write_text("\n".join([*kernel_own[:20], *ours]) + "\n")
    lines, refused = _read(kern)
    assert refused == 1 and len(lines) == len(kernel_own[:20])
    assert not any(marker in line for line in lines)

    dmesg = subprocess.run(["dmesg", "-x"], capture_output=True, text=True, timeout=30)
    if dmesg.returncode != 0:
        pytest.skip(f"dmesg -x: {dmesg.stderr.strip()}")
    decoded = [line for line in dmesg.stdout.splitlines() if line]
    (mine,) = [line for line in decoded if marker in line]
    assert mine.startswith("user")
    captured = tmp_path / "dmesg.log"
    kernel_lines = [line for line in decoded if line.startswith("kern")][:20]
    captured.write_text("\n".join([*kernel_lines, mine]) + "\n")
    lines, refused = _read(captured)
    assert refused == 1 and len(lines) == len(kernel_lines)
