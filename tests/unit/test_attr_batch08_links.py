"""Fabric links and storage controllers read across lines (batch08's low-confidence logs
taught them; tested here on other tools' and drivers' output): a fabric interface listed UP
without a link, a NIC link that keeps coming up, a RAID/SAS controller that stopped
completing commands. Healthy listings of the same tools stay "no failure"."""

from __future__ import annotations

from pathlib import Path

import pytest
from log_verdict import verdict_of as _verdict

from trainmedic.core.model import Category

FAILURES: dict[str, tuple[str, Category]] = {
    "ip_link_ib_no_carrier": (
        "1: lo: <LOOPBACK,UP,LOWER_UP> mtu 65536 qdisc noqueue state UNKNOWN mode DEFAULT\n"
        "4: ib0: <NO-CARRIER,BROADCAST,MULTICAST,UP> mtu 2044 qdisc mq state DOWN mode DEFAULT\n",
        Category.NETWORK_HARDWARE,
    ),
    "ifconfig_slingshot_not_running": (
        "hsn0: flags=4099<UP,BROADCAST,MULTICAST>  mtu 9000\n"
        "        inet 10.100.0.7  netmask 255.255.0.0\n",
        Category.NETWORK_HARDWARE,
    ),
    "ice_link_flapping": (
        "kernel: ice 0000:3b:00.0 ens1f0: NIC Link is up 100 Gbps Full Duplex\n"
        "kernel: ice 0000:3b:00.0 ens1f0: NIC Link is up 100 Gbps Full Duplex\n"
        "kernel: ice 0000:3b:00.0 ens1f0: NIC Link is up 100 Gbps Full Duplex\n",
        Category.NETWORK_HARDWARE,
    ),
    "mpt3sas_firmware_fault": (
        "kernel: mpt3sas_cm0: fault_state(0x2622)!\n"
        "kernel: mpt3sas_cm0: FW in FAULT state, issuing host reset\n",
        Category.NODE_HARDWARE,
    ),
    "smartpqi_offline": (
        "kernel: smartpqi 0000:3b:00.0: controller is not responding, taking controller offline\n",
        Category.NODE_HARDWARE,
    ),
}


@pytest.mark.parametrize("name", sorted(FAILURES))
def test_link_or_controller_failure(tmp_path: Path, name: str) -> None:
    text, category = FAILURES[name]
    verdict = _verdict(tmp_path, text)
    assert verdict.failure and verdict.category is category, verdict.basis


def test_link_state_read_from_a_listing_is_a_guess(tmp_path: Path) -> None:
    text = "ib0: flags=4099<UP,BROADCAST,MULTICAST>  mtu 4092\n"
    assert _verdict(tmp_path, text).confidence < 0.5


HEALTHY: dict[str, str] = {
    "ip_link_healthy_with_unplugged_ethernet": (
        "2: eno1: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 state UP mode DEFAULT\n"
        "3: eno2: <NO-CARRIER,BROADCAST,MULTICAST,UP> mtu 1500 state DOWN mode DEFAULT\n"
        "4: ib0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 2044 state UP mode DEFAULT\n"
    ),
    "ifconfig_ib_running": (
        "ib0: flags=4163<UP,BROADCAST,RUNNING,MULTICAST>  mtu 2044\n"
        "ib1: flags=4098<BROADCAST,MULTICAST>  mtu 4092\n"
    ),
    "link_up_once_per_port": (
        "kernel: mlx5_core 0000:01:00.0 eth0: Link up\n"
        "kernel: mlx5_core 0000:01:00.1 eth1: Link up\n"
        "kernel: ice 0000:3b:00.0 ens1f0: NIC Link is up 100 Gbps Full Duplex\n"
    ),
    "controller_boot_messages": (
        "kernel: megaraid_sas 0000:5a:00.0: FW now in Ready state\n"
        "kernel: mpt3sas_cm0: LSISAS3008: FWVersion(16.00.01.00), ChipRevision(0x02)\n"
    ),
}


@pytest.mark.parametrize("name", sorted(HEALTHY))
def test_healthy_listing_is_no_failure(tmp_path: Path, name: str) -> None:
    verdict = _verdict(tmp_path, HEALTHY[name])
    assert not verdict.failure, verdict.basis
