"""Mechanisms read after batch60..batch61's first sight (cluster telemetry and diagnostics:
DCGM and its validation suite, metric exporters, the InfiniBand management tools, rasdaemon):
each a family of messages (other tools' and versions' wordings of the same failure) with
healthy or differently-caused counter-cases, never one log's lines (the batches' own logs are
scored by test_attr_realworld's floors). A tool that measures a part names the part in every
line; when the tool itself could not run, the part was never measured."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.unit.log_verdict import (
    family_test,
    healthy_test,
    verdict_of,
)

from trainmedic.core.model import Category, Kind


def _records(template: str, count: int) -> str:
    """``count`` numbered, dated records of one fixed width (as ras-mc-ctl prints them)."""
    return "".join(template.format(i=i) + "\n" for i in range(1, count + 1))


_FAILURES: dict[str, tuple[str, Category, Kind]] = {
    # a DCGM client that cannot reach nv-hostengine: the monitoring deployment
    "dcgmi_unable_to_connect": (
        "$ dcgmi discovery -l\n"
        "Error: Unable to connect to host engine. Host engine connection invalid/disconnected.\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    "exporter_remote_hostengine": (
        'time="2024-05-02T08:00:01Z" level=fatal msg="Error connecting to nv-hostengine: '
        'DCGM_ST_CONNECTION_NOT_VALID"\n',
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    "health_agent_engine": (
        "2025-01-07 10:11:12 ERROR gpu-health: could not connect to the standalone host engine "
        "at unix:///run/dcgm/nv-hostengine.sock\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    # the validation suite missing its own files: the DCGM installation
    "nvvs_package_config": (
        "2024-02-01 09:00:00.100 ERROR [4410:4410] Could not read package diag config. Please "
        "make sure the datacenter-gpu-manager-4-config package is installed "
        "[ConfigFileParser_v2.cpp:230]\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    "nvvs_plugin_directory": (
        "Error: nvvs could not start: plugin directory /usr/libexec/datacenter-gpu-manager-4/"
        "plugins/cuda11 does not exist\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    # a whole-GPU diagnostic refusing a MIG-partitioned GPU: configuration against the tool
    "diag_not_supported_with_mig": (
        "Error: The diagnostic is not supported on GPUs with MIG enabled (GPU 3).\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    "mig_enabled_diag_cannot_run": (
        "dcgmi diag -r 2\n"
        "MIG mode is enabled on GPU 00000000:B7:00.0, so the diagnostics cannot run on it.\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    # a sysfs counter the driver refuses in the port's mode: the collector's assumption
    "exporter_read_einval": (
        "E0302 12:00:01.000 collector.go:97] collector failed: read /sys/class/infiniband/"
        "mlx5_4/ports/1/counters/link_downed: operation not supported\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    "script_cat_einval": (
        "+ cat /sys/class/infiniband/mlx5_2/ports/1/counters/excessive_buffer_overrun_errors\n"
        "cat: /sys/class/infiniband/mlx5_2/ports/1/counters/excessive_buffer_overrun_errors: "
        "Invalid argument\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    # the management tools unable to open the local MAD port: the port's set-up for them
    "sminfo_cannot_open_port": (
        "# sminfo\n"
        "ibwarn: [51220] mad_rpc_open_port: can't open UMAD port ((null):0)\n"
        "sminfo: iberror: failed: Failed to open '(null)' port '0'\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    "ibqueryerrors_client_register": (
        "ibwarn: [7712] mad_rpc_open_port: client_register for mgmt 2 failed\n"
        "ibqueryerrors: iberror: failed: Failed to open 'mlx5_3' port '1'\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    # a collector's DCGM field read answered with an error status: the collector's fields
    "field_value_negative_status": (
        "2021-03-02 10:00:01 telemetry[881]: WARNING GPU 2 nvlink_recovery_error_count_l3 "
        "fieldId = 431 fieldType = 105 status = -13\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    "exporter_field_unknown": (
        'time="2024-06-01T00:00:00Z" level=warning msg="skipping field 1011 on GPU 1: '
        'DCGM_ST_UNKNOWN_FIELD"\n',
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    # corrected memory-controller machine checks that keep coming: a DIMM wearing out
    "amd_umc_corrected_records": (
        "MCE events:\n"
        + _records(
            "{i} 2025-03-0{i} 11:20:05 +0000 error: Corrected error, no action required., CPU 7, "
            "bank Unified Memory Controller (bank=16), mcg mcgstatus=0, mci CECC, "
            "memory_channel=1,csrow=0, mcgcap=0x00000117, status=0x9c2041000000011b",
            4,
        ),
        Category.NODE_HARDWARE,
        Kind.CRASH,
    ),
    "intel_imc_corrected_records": (
        _records(
            "{i} 2023-08-1{i} 02:03:04 +0200 error: MEMORY CONTROLLER RD_CHANNEL2_ERR "
            "Transaction: Memory read error, mcg mcgstatus=0, mci Corrected_error, n_errors=1, "
            "mcgcap=0x0f000c14",
            3,
        ),
        Category.NODE_HARDWARE,
        Kind.CRASH,
    ),
}

_HEALTHY: dict[str, str] = {
    "hostengine_started_and_reached": (
        "Started host engine version 3.3.5 using port number: 5555\n"
        "Connected to nv-hostengine at localhost:5555\n"
    ),
    "nvvs_plugins_loaded": (
        "Plugin: Memory, version 3.2.6, loaded\nSuccessfully ran diagnostic for group.\n"
    ),
    "mig_enabled_and_partitioned": (
        "Enabled MIG Mode for GPU 00000000:07:00.0\n"
        "All done.\n"
        "Successfully created GPU instance ID  1 on GPU  0 using profile MIG 3g.40gb (ID  9)\n"
    ),
    # one corrected record is noise the ECC handled
    "one_corrected_memory_record": (
        "1 2024-11-02 03:52:38 +0000 error: Corrected error, no action required., CPU 6, bank "
        "Unified Memory Controller (bank=18), mcg mcgstatus=0, mci CECC, memory_channel=1,"
        "csrow=0, mcgcap=0x0000011c, status=0x9c2040000000011b\n"
    ),
    # field reads that returned their values
    "field_values_read": (
        "GPU 1 gpu_temp version = 16781336 fieldId = 150 fieldType = 105 status = 0\n"
        "GPU 1 power_usage version = 16781336 fieldId = 155 fieldType = 100 status = 0\n"
    ),
    # a RAS summary that found nothing
    "ras_summary_without_errors": (
        "# ras-mc-ctl --errors\nNo Memory errors.\n\nNo PCIe AER errors.\n\nNo MCE errors.\n"
    ),
    # metric samples named after errors, at zero
    "exporter_samples_at_zero": (
        "# HELP node_infiniband_port_errors_total Port errors\n"
        "# TYPE node_infiniband_port_errors_total counter\n"
        'node_infiniband_port_errors_total{device="mlx5_1",port="1"} 0\n'
        'DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{gpu="2",UUID="GPU-9a1",device="nvidia2"} 0\n'
        'DCGM_FI_DEV_XID_ERRORS{gpu="5",UUID="GPU-77c",device="nvidia5",GPU_I_ID="2"} 0\n'
    ),
    # an XML health report's structure and zero counts
    "nvsmi_xml_zero_counts": (
        '<gpu id="00000000:3B:00.0">\n'
        "  <ecc_errors>\n"
        "    <volatile>\n"
        "      <sram_correctable>0</sram_correctable>\n"
        "      <dram_uncorrectable>0</dram_uncorrectable>\n"
        "    </volatile>\n"
        "  </ecc_errors>\n"
    ),
}


test_mechanism_family = family_test(_FAILURES)


test_healthy_counter_case = healthy_test(_HEALTHY)


# Lines that look alike but carry another cause: they must not be read as the tool's set-up.
_NOT_THE_TOOL: dict[str, str] = {
    # a sysfs read that fails with EIO: the device answered badly, not an unsupported attribute
    "sysfs_read_io_error": (
        'level=ERROR msg="collector failed" name=infiniband err="failed to read file '
        '\\"/sys/class/infiniband/mlx5_0/ports/1/counters/port_rcv_errors\\": input/output '
        'error"\n'
    ),
    # a MAD to a remote port that never answered: the fabric
    "mad_to_a_remote_port_timed_out": (
        "ibwarn: [3301] mad_rpc: _do_madrpc failed; dport (Lid 23)\n"
        "ibwarn: [3301] _do_madrpc: recv failed: Connection timed out\n"
    ),
    # an exporter's XID gauge at a non-zero value: a device event, not a zero sample
    "xid_gauge_non_zero": ('DCGM_FI_DEV_XID_ERRORS{gpu="3",UUID="GPU-1",device="nvidia3"} 79\n'),
}


@pytest.mark.parametrize("name", sorted(_NOT_THE_TOOL))
def test_lookalikes_stay_failures_of_another_cause(tmp_path: Path, name: str) -> None:
    verdict = verdict_of(tmp_path, _NOT_THE_TOOL[name])
    assert verdict.failure, (name, verdict)
    assert verdict.category is not Category.SYSTEM_SOFTWARE, (name, verdict)


_GUESSES = (
    "dcgmi_unable_to_connect",
    "exporter_read_einval",
    "sminfo_cannot_open_port",
    "amd_umc_corrected_records",
)


@pytest.mark.parametrize("name", _GUESSES)
def test_these_readings_stay_guesses(tmp_path: Path, name: str) -> None:
    """An engine not reached, an attribute refused, a port not opened: usually the tool's
    set-up, not always (an engine that crashed on a failing GPU, a port whose HCA is dying);
    recurring corrected errors are a part wearing out, not yet failed: restart, never stop or
    drain on these."""
    verdict = verdict_of(tmp_path, _FAILURES[name][0])
    assert verdict.confidence < 0.5, (name, verdict)


def test_a_lost_gpu_on_a_field_read_is_not_the_collectors_fields(tmp_path: Path) -> None:
    """The GPU's own status on a field read (lost, reset required) is not a field the API
    does not serve: it never becomes the collector-versus-DCGM reading."""
    verdict = verdict_of(
        tmp_path, 'level=error msg="failed to read field 150 on gpu 4: DCGM_ST_GPU_IS_LOST"\n'
    )
    assert verdict.root_cause is None or (
        verdict.root_cause.signature != "monitor.dcgm_field_status_error"
    ), verdict
