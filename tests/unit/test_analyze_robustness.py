"""analyze on hostile input: binary, invalid UTF-8, NULs, a 10 MB line, empty, unreadable."""

from __future__ import annotations

import os
import random
import shutil
import tempfile
from pathlib import Path

import pytest

from trainmedic.core.errors import InputError
from trainmedic.core.model import Kind
from trainmedic.offline.analyze import analyze_path


def _healthy(verdict_kind: Kind, failure: bool) -> None:
    assert verdict_kind is Kind.NONE and not failure


def test_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.log"
    path.write_bytes(b"")
    r = analyze_path(path)
    _healthy(r.verdict.kind, r.verdict.failure)
    assert r.lines == 0


def test_binary_garbage(tmp_path: Path) -> None:
    path = tmp_path / "random.bin.log"
    # Seeded: the same bytes every run, so a failure can be reproduced.
    path.write_bytes(bytes(range(256)) * 4000 + random.Random(7).randbytes(50_000))
    r = analyze_path(path)
    _healthy(r.verdict.kind, r.verdict.failure)


def test_invalid_utf8_and_nuls_still_match(tmp_path: Path) -> None:
    path = tmp_path / "mixed.log"
    path.write_bytes(
        b"\xff\xfe garbage \x80\x81\n"
        b"step 1 loss 2.0\x00\x00\n"
        b"\x00\x00RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB\xc3\x28\n"
    )
    r = analyze_path(path)
    assert r.verdict.failure
    assert r.verdict.root_cause is not None and r.verdict.root_cause.line == 3
    assert "\x00" not in r.verdict.root_cause.text


def test_ten_megabyte_single_line(tmp_path: Path) -> None:
    path = tmp_path / "long.log"
    with path.open("wb") as f:
        f.write(b"x" * (10 * 1024 * 1024))
        f.write(b"\nRuntimeError: CUDA error: an illegal memory access was encountered\n")
    r = analyze_path(path)
    assert r.lines == 2
    assert r.verdict.root_cause is not None and r.verdict.root_cause.line == 2


def test_missing_path_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="nothere"):
        analyze_path(tmp_path / "nothere.log")


def test_permission_denied(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        _permission_denied_as_nobody()  # root reads any file: ask an unprivileged user
        return
    path = tmp_path / "secret.log"
    path.write_text("x\n")
    path.chmod(0)
    with pytest.raises(InputError, match=r"secret\.log"):
        analyze_path(path)


def _permission_denied_as_nobody() -> None:
    """A forked child turned ``nobody`` (its modules already loaded, so the checkout's own
    permissions do not matter) analyses a file only root may read."""
    folder = Path(tempfile.mkdtemp(prefix="tm-perm-"))  # pytest's tmp is root-only
    try:
        folder.chmod(0o755)
        path = folder / "secret.log"
        path.write_text("x\n")
        path.chmod(0)
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: drop root, try, report the message, never return to pytest
            message = "no error"
            try:
                os.setgroups([])
                os.setgid(65534)
                os.setuid(65534)
                analyze_path(path)
            except InputError as exc:
                message = str(exc)
            finally:
                os.write(write_end, message.encode())
                os._exit(0)
        os.close(write_end)
        os.waitpid(pid, 0)
        with os.fdopen(read_end) as pipe:
            assert pipe.read() == f"{path}: cannot read: Permission denied"
    finally:
        shutil.rmtree(folder)


def test_directory_without_files(tmp_path: Path) -> None:
    (tmp_path / "job").mkdir()
    with pytest.raises(InputError, match="no readable"):
        analyze_path(tmp_path / "job")


def test_directory_is_one_job(tmp_path: Path) -> None:
    job = tmp_path / "job"
    job.mkdir()
    (job / "rank0.log").write_text(
        "[rank0]:[E1128 14:11:59.5 ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective "
        "operation timeout: WorkNCCL(SeqNum=8361, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
        "Timeout(ms)=600000) ran for 600047 milliseconds before timing out.\n"
    )
    (job / "kern.log").write_text(
        "Nov 28 14:01:59 gpu-node-07 kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=48213, "
        "name=python, GPU has fallen off the bus.\n"
    )
    r = analyze_path(job)
    assert len(r.files) == 2
    assert r.verdict.category == "gpu_hardware"
    assert r.verdict.implicated.nodes == ("gpu-node-07",)
    assert r.advice.drain_nodes == ("gpu-node-07",)


def test_gzip_log(tmp_path: Path) -> None:
    import gzip

    path = tmp_path / "rank0.log.gz"
    with gzip.open(path, "wb") as f:
        f.write(b"OSError: [Errno 116] Stale file handle\n")
    r = analyze_path(path)
    assert r.verdict.category == "storage"


@pytest.mark.skipif(not Path("/proc/self/mem").exists(), reason="needs Linux /proc")
def test_read_error_is_an_input_error_even_as_root() -> None:
    # Reading /proc/self/mem at offset 0 fails with EIO for every user, root included.
    with pytest.raises(InputError, match="mem: cannot read"):
        analyze_path("/proc/self/mem")


def test_broken_symlink(tmp_path: Path) -> None:
    link = tmp_path / "gone.log"
    link.symlink_to(tmp_path / "nowhere")
    with pytest.raises(InputError, match="gone"):
        analyze_path(link)


def test_directory_with_an_unreadable_file_keeps_the_rest(tmp_path: Path) -> None:
    job = tmp_path / "job"
    job.mkdir()
    (job / "rank0.log").write_text("OSError: [Errno 116] Stale file handle\n")
    (job / "mem.log").symlink_to("/proc/self/mem")
    r = analyze_path(job)
    assert r.verdict.category == "storage"
    assert len(r.skipped) == 1 and "mem.log" in r.skipped[0]


def test_ansi_colours_are_stripped(tmp_path: Path) -> None:
    path = tmp_path / "colour.log"
    path.write_bytes(
        b"\x1b[31mRuntimeError: CUDA error: uncorrectable ECC error encountered\x1b[0m\n"
    )
    r = analyze_path(path)
    assert r.verdict.category == "gpu_hardware"
    assert r.verdict.root_cause is not None and "\x1b" not in r.verdict.root_cause.text


def test_yearless_kernel_log_takes_the_jobs_year(tmp_path: Path) -> None:
    job = tmp_path / "job"
    job.mkdir()
    # the NCCL error comes first; a kernel line two hours later does not explain it
    (job / "rank0.log").write_text(
        "2026-03-07 10:00:00,000 ERROR ncclUnhandledCudaError: Call to CUDA function failed.\n"
    )
    (job / "kern.log").write_text(
        "Mar  7 12:00:00 n1 kernel: pcieport 0000:00:01.0: AER: Uncorrected (Fatal) error "
        "received\n"
    )
    r = analyze_path(job)
    assert r.verdict.root_cause is not None
    assert r.verdict.root_cause.source.endswith("rank0.log"), r.verdict.basis
