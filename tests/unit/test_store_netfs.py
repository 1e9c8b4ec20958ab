"""The SQLite-on-a-network-filesystem check on recorded mount tables (mountinfo and
/proc/mounts lines as Linux writes them), and the warning ``serve`` gives."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from trainmedic.cli.serve import warn_if_shared_sqlite
from trainmedic.store.netfs import (
    filesystem_of,
    network_filesystem,
    parse_mounts,
    sqlite_on_network_filesystem,
)

# /proc/self/mountinfo of a compute node: NFS home through autofs, Lustre scratch, a local
# disk, tmpfs below the NFS mount, a path with a space (written \040).
MOUNTINFO = """\
22 27 0:21 / /proc rw,relatime shared:12 - proc proc rw
27 1 259:2 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p2 rw,errors=remount-ro
41 27 0:37 / /home rw,relatime shared:24 - autofs /etc/auto.home rw,fd=6,pgrp=1,direct
88 41 0:52 / /home rw,relatime shared:40 - nfs4 head:/export/home rw,vers=4.2,hard,proto=tcp
90 88 0:60 / /home/tmp rw,nosuid shared:41 - tmpfs tmpfs rw,size=1048576k
95 27 0:70 / /lustre/scratch rw,flock,lazystatfs - lustre 10.0.0.1@o2ib:/scratch rw,flock
97 27 259:3 / /var/lib/my\\040state rw,relatime - xfs /dev/nvme1n1 rw
98 27 0:80 / /mnt/s3 rw,nosuid,nodev - fuse.s3fs s3fs rw,user_id=0,group_id=0
"""
PROC_MOUNTS = """\
/dev/sda1 / ext4 rw 0 0
head:/export /shared nfs4 rw 0 0
tmpfs /shared/tmp tmpfs rw 0 0
//fs/share /mnt/win cifs rw,vers=3.0 0 0
"""


def test_mountinfo_lines_give_each_mount_point_and_type() -> None:
    mounts = parse_mounts(MOUNTINFO)
    assert mounts[0] == ("/proc", "proc")
    assert ("/var/lib/my state", "xfs") in mounts
    assert ("/home", "autofs") in mounts and ("/home", "nfs4") in mounts
    assert parse_mounts("garbage\n\n") == []


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/home/alice/.local/state/trainmedic", "nfs4"),  # NFS mounted over the autofs point
        ("/home/tmp/state", None),  # tmpfs below the NFS mount: local
        ("/lustre/scratch/u/state", "lustre"),
        ("/lustre/scratchy", None),  # a prefix of the name, not a path below it
        ("/var/lib/my state/trainmedic", None),
        ("/mnt/s3/db", "fuse.s3fs"),
        ("/var/lib/trainmedic", None),
    ],
)
def test_network_filesystems_are_told_apart(path: str, expected: str | None) -> None:
    assert network_filesystem(Path(path), MOUNTINFO) == expected


def test_proc_mounts_lines_are_understood_too() -> None:
    assert network_filesystem(Path("/shared/state"), PROC_MOUNTS) == "nfs4"
    assert network_filesystem(Path("/shared/tmp/state"), PROC_MOUNTS) is None
    assert network_filesystem(Path("/mnt/win/db"), PROC_MOUNTS) == "cifs"
    assert filesystem_of(Path("/x"), parse_mounts(PROC_MOUNTS)) == "ext4"


def test_only_a_sqlite_file_on_a_network_filesystem_is_warned_about() -> None:
    warning = sqlite_on_network_filesystem("sqlite:////home/alice/state/trainmedic.db", MOUNTINFO)
    assert warning is not None and "nfs4" in warning and "PostgreSQL" in warning
    assert "\n" not in warning
    for url in (
        "sqlite:////var/lib/trainmedic/trainmedic.db",
        "sqlite://",
        "sqlite:///:memory:",
        "postgresql://u@head/trainmedic",
        "not a url",
    ):
        assert sqlite_on_network_filesystem(url, MOUNTINFO) is None, url
    assert sqlite_on_network_filesystem("sqlite+pysqlite:////lustre/scratch/t.db", MOUNTINFO)


def test_serve_warns_once_in_its_log(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="trainmedic.serve"):
        warn_if_shared_sqlite("sqlite:////mnt/s3/trainmedic.db", MOUNTINFO)
        warn_if_shared_sqlite("sqlite:////var/lib/trainmedic.db", MOUNTINFO)
    (record,) = caplog.records
    assert "fuse.s3fs" in record.getMessage()


def test_this_machines_own_table_parses() -> None:
    mounts = parse_mounts(Path("/proc/self/mountinfo").read_text())
    assert any(point == "/" for point, _ in mounts)
