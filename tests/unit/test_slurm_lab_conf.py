"""The lab's slurm.conf carries the settings SLURM_LAB.md found necessary."""

from __future__ import annotations

from pathlib import Path

from trainmedic.lab.conf import LabLayout, render_slurm_conf
from trainmedic.lab.telemetry import FileBackedStub, read_overrides, set_gpu_metric


def _layout() -> LabLayout:
    return LabLayout(
        base=Path("/lab"),
        cluster_name="tmlab",
        node_names=("node1", "node2"),
        slurmctld_port=7000,
        slurmd_ports=(7001, 7002),
        telemetry_ports=(7101, 7102),
        cred_expire=10,
    )


def test_conf_has_per_node_ports_and_lab_settings() -> None:
    conf = dict(
        line.split("=", 1) for line in render_slurm_conf(_layout()).splitlines() if "=" in line
    )
    assert conf["AuthInfo"] == "socket=/lab/munge/munge.socket,cred_expire=10"
    assert conf["SlurmdSpoolDir"] == "/lab/spool/%n"
    assert conf["SlurmctldPort"] == "7000"
    for key, value in {
        "SlurmUser": "root",
        "ProctrackType": "proctrack/linuxproc",
        "SlurmdParameters": "config_overrides",
        "JobRequeue": "1",
        "MinJobAge": "300",
        "JobCompType": "jobcomp/filetxt",
    }.items():
        assert conf[key] == value
    text = render_slurm_conf(_layout())
    assert "NodeName=node1 NodeHostname=localhost NodeAddr=127.0.0.1 Port=7001" in text
    assert "NodeName=node2 NodeHostname=localhost NodeAddr=127.0.0.1 Port=7002" in text
    assert "PartitionName=debug Nodes=node1,node2 Default=YES" in text


def test_telemetry_file_overrides_one_gpu(tmp_path: Path) -> None:
    set_gpu_metric(tmp_path, 1, "DCGM_FI_DEV_XID_ERRORS", 79)
    set_gpu_metric(tmp_path, 1, "DCGM_FI_DEV_GPU_TEMP", 91.5)
    assert read_overrides(tmp_path) == {
        "1": {"DCGM_FI_DEV_XID_ERRORS": 79.0, "DCGM_FI_DEV_GPU_TEMP": 91.5}
    }
    stub = FileBackedStub("node7", tmp_path, gpus=2, port=0)
    try:
        lines = stub.exposition().splitlines()
    finally:
        stub.stop()
    xid = [ln for ln in lines if ln.startswith("DCGM_FI_DEV_XID_ERRORS{")]
    assert len(xid) == 2
    assert xid[0].startswith('DCGM_FI_DEV_XID_ERRORS{gpu="0"') and xid[0].endswith(" 0")
    assert 'Hostname="node7"' in xid[1] and xid[1].endswith(" 79")
    assert any(
        ln.startswith('DCGM_FI_DEV_GPU_TEMP{gpu="1"') and ln.endswith(" 91.5") for ln in lines
    )


def test_missing_or_torn_telemetry_file_means_defaults(tmp_path: Path) -> None:
    assert read_overrides(tmp_path) == {}
    (tmp_path / "telemetry.json").write_text("{not json")
    assert read_overrides(tmp_path) == {}
