"""SshRunner against a real sshd on loopback, with host-key checking, running the real Slurm
client commands of the lab cluster on the "head node" (this host)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from trainmedic.core.errors import SchedulerUnavailable
from trainmedic.core.states import NodeState
from trainmedic.lab import SlurmCluster
from trainmedic.lab.procs import free_ports, terminate
from trainmedic.schedulers.slurm.runner import SshRunner
from trainmedic.schedulers.slurm.scheduler import SlurmScheduler

pytestmark = [pytest.mark.slow, pytest.mark.slurm]

SSHD = "/usr/sbin/sshd"


@dataclass(frozen=True)
class SshServer:
    port: int
    client_key: Path
    known_hosts: Path
    directory: Path


def _keygen(path: Path) -> None:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)],
        check=True,
        capture_output=True,
    )


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshServer]:
    if os.geteuid() != 0:
        pytest.skip("needs root: sshd logs in as root with a key")
    if not (os.access(SSHD, os.X_OK) and shutil.which("ssh") and shutil.which("ssh-keygen")):
        pytest.skip("needs openssh-server and openssh-client (scripts/bootstrap.sh installs them)")
    d = tmp_path_factory.mktemp("sshd")
    _keygen(d / "host_key")
    _keygen(d / "client_key")
    (d / "authorized_keys").write_text((d / "client_key.pub").read_text())
    (port,) = free_ports(1)
    (d / "sshd_config").write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {d / 'host_key'}\n"
        f"PidFile {d / 'sshd.pid'}\nAuthorizedKeysFile {d / 'authorized_keys'}\n"
        "PermitRootLogin prohibit-password\nPasswordAuthentication no\n"
        "KbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\n"
    )
    host_pub = (d / "host_key.pub").read_text().split()
    (d / "known_hosts").write_text(f"[127.0.0.1]:{port} {host_pub[0]} {host_pub[1]}\n")
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege-separation dir
    log = open(d / "sshd.log", "wb")  # noqa: SIM115 - lives as long as the server
    proc = subprocess.Popen(
        [SSHD, "-D", "-e", "-f", str(d / "sshd_config")], stdout=log, stderr=subprocess.STDOUT
    )
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"sshd did not start: {(d / 'sshd.log').read_text()[-500:]}")
                time.sleep(0.05)
        yield SshServer(port, d / "client_key", d / "known_hosts", d)
    finally:
        terminate([proc.pid])
        proc.wait(5)
        log.close()


def _runner(
    server: SshServer, cluster: SlurmCluster, known_hosts: Path, control_dir: str | None = None
) -> SshRunner:
    return SshRunner(
        "127.0.0.1",
        port=server.port,
        user="root",
        identity_file=str(server.client_key),
        known_hosts=str(known_hosts),
        slurm_conf=str(cluster.conf_path),
        control_dir=control_dir,
    )


def test_poll_and_act_over_ssh(sshd: SshServer, slurm_cluster: SlurmCluster) -> None:
    slurm = SlurmScheduler(_runner(sshd, slurm_cluster, sshd.known_hosts))
    snap = slurm.poll(())
    assert not snap.stale, snap.error
    assert {n.name for n in snap.nodes} == set(slurm_cluster.nodes)
    assert all(n.state is NodeState.IDLE for n in snap.nodes)
    try:
        assert slurm.drain("node4", "over ssh: xid 79; rm -rf /tmp/x") is True
        node = slurm.node_details("node4")
        assert node.drain and node.reason == "trainmedic: over ssh: xid 79; rm -rf /tmp/x"
        slurm.resume_node("node4")
        assert not slurm.node_details("node4").drain
    finally:
        slurm_cluster.run(["scontrol", "update", "NodeName=node4", "State=RESUME"], check=False)


def test_wrong_host_key_is_refused(sshd: SshServer, slurm_cluster: SlurmCluster) -> None:
    _keygen(sshd.directory / "other_key")
    other = (sshd.directory / "other_key.pub").read_text().split()
    bad = sshd.directory / "known_hosts_wrong"
    bad.write_text(f"[127.0.0.1]:{sshd.port} {other[0]} {other[1]}\n")
    runner = _runner(sshd, slurm_cluster, bad)
    with pytest.raises(SchedulerUnavailable, match=r"Host key verification failed"):
        runner.run(["sinfo", "--json"], timeout=10)
    snap = SlurmScheduler(runner).poll(())
    assert snap.stale and "ssh 127.0.0.1" in snap.error


def test_multiplexed_connection_is_reused_and_closed(
    sshd: SshServer, slurm_cluster: SlurmCluster
) -> None:
    control = Path(tempfile.mkdtemp(prefix="tm", dir="/tmp"))  # socket paths must be short
    runner = _runner(sshd, slurm_cluster, sshd.known_hosts, control_dir=str(control))
    try:
        t0 = time.monotonic()
        assert not SlurmScheduler(runner).poll(()).stale
        first = time.monotonic() - t0
        assert list(control.iterdir())  # the control socket
        t0 = time.monotonic()
        assert not SlurmScheduler(runner).poll(()).stale
        print(f"\nssh poll: first {first:.2f} s, multiplexed {time.monotonic() - t0:.2f} s")
    finally:
        runner.close()
    deadline = time.monotonic() + 5
    while list(control.iterdir()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not list(control.iterdir())  # the master exited with its socket
    control.rmdir()
