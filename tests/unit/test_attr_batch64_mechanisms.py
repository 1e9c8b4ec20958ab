"""Mechanisms read after batch64..batch65's first sight (hardware diagnostics and bring-up, the
tools that query devices, research repositories' native code): each a family of messages
(other tools' and versions' wordings of the same failure) with healthy or differently-caused
counter-cases, never one log's lines (the batches' own logs are scored by
test_attr_realworld's floors). A device's bring-up names the step that did not complete; a
tool that could not open, query or judge a device has not measured it."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.unit.log_verdict import (
    family_test,
    healthy_test,
    verdict_of,
)

from trainmedic.core.model import Category, Kind

_FAILURES: dict[str, tuple[str, Category, Kind]] = {
    # the card's video BIOS tables not executing at initialisation: the card, as a guess
    "radeon_atombios_stuck": (
        "[drm:atom_execute_table_locked [radeon]] *ERROR* atombios stuck executing C4A2 "
        "(len 62, WS 0, PS 0) @ 0xC4B5\n"
        "radeon 0000:01:00.0: Fatal error during GPU init\n",
        Category.GPU_HARDWARE,
        Kind.CRASH,
    ),
    "amdgpu_post_error": (
        "amdgpu 0000:c4:00.0: amdgpu: gpu post error!\n"
        "amdgpu 0000:c4:00.0: amdgpu: Fatal error during GPU init\n",
        Category.GPU_HARDWARE,
        Kind.CRASH,
    ),
    # a PCIe link trained below its capability at power-on: the slot, riser or connector
    "uefi_link_width_not_optimal": (
        "UEFI0081: PCIe link width is not optimal for Bus:59 D:0 F:0.\n"
        "Expected link width is x16 but actual link width is x8.\n",
        Category.NODE_HARDWARE,
        Kind.CRASH,
    ),
    "link_speed_expected_gen4": (
        "POST: slot 3: Expected link speed is Gen4 but actual link speed is Gen2.\n",
        Category.NODE_HARDWARE,
        Kind.CRASH,
    ),
    # an accelerator's management firmware that did not finish booting: a firmware image
    "tt_flash_arc_boot": (
        "Stage: DETECT\n (3/5) ARC: WH FW boot not complete\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    "amdgpu_psp_sos": (
        "[drm:psp_hw_start [amdgpu]] *ERROR* PSP load sos failed!\n"
        "[drm:psp_hw_init [amdgpu]] *ERROR* PSP firmware loading failed\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    # VM faults on behalf of no process through the memory hub: the bus, as a guess
    "mmhub_faults_no_process": (
        "".join(
            "amdgpu 0000:0b:00.0: [mmhub] VMC page fault (src_id:0 ring:171 vmid:0 pasid:0)\n"
            for _ in range(3)
        ),
        Category.NODE_HARDWARE,
        Kind.CRASH,
    ),
    "mmhub0_no_retry_no_process": (
        "amdgpu 0000:43:00.0: amdgpu: [mmhub0] no-retry page fault (src_id:0 ring:8 vmid:0 "
        "pasid:0, for process  pid 0 thread  pid 0)\n",
        Category.NODE_HARDWARE,
        Kind.CRASH,
    ),
    # slurmd configured to detect GPUs through a library the node lacks: the node's software
    "slurmd_nvml_lib_missing": (
        "slurmd: debug:  gres/gpu: init: loaded\n"
        "slurmd: We were configured with nvml functionality, but that lib wasn't found on the "
        "system.\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    "slurmd_oneapi_not_built": (
        "[2025-02-03T08:00:00.000] Configured with oneapi, but oneapi isn't enabled during the "
        "build.\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    # slurmd discarding configured GPUs that do not match the detected ones: the configuration
    "gres_mismatching_links": (
        "slurmd: error: This GPU specified in [slurm|gres].conf has mismatching Cores or Links "
        "from the device found on the system. Ignoring it.\n",
        Category.SCHEDULER,
        Kind.CRASH,
    ),
    "gres_config_only_discarded": (
        "slurmd-gpu-a7: error: Discarding the following config-only GPU due to lack of File "
        "specification:\n"
        "slurmd-gpu-a7: error:     GRES[gpu] Type:h100 Count:4 Cores(96):(null)  Links:(null) "
        "Flags:HAS_TYPE,ENV_NVML File:(null) UniqueId:(null)\n",
        Category.SCHEDULER,
        Kind.CRASH,
    ),
    # an SMI whose machine-readable query came back empty: the tool version
    "smi_no_csv_data": (
        "# rocm-smi --csv --showmemuse\nWARNING: No CSV data to report\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    # a NIC firmware tool that cannot open the adapter: the tool's access
    "flint_cannot_open": (
        "# flint -d /dev/mst/mt4125_pciconf0 q\n"
        "-E- Cannot open Device: /dev/mst/mt4125_pciconf0. No such file or directory. "
        "MFE_CR_ERROR\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    "mlxconfig_identify": (
        "$ mlxconfig -d 81:00.0 q\n-E- Failed to identify the device - Can not create "
        "SignatureManager!\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    # a hardware check against a negative (unset) maximum: the check, not the part
    "hpasm_unset_threshold": (
        "CRITICAL - 4 memory temperature too high (35C, -1 max)\nchecking fans\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    "threshold_named_first": (
        "WARNING - 12 psu temperature is too high (29C, max -128C)\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    # TensorFlow's ROCm allocator out of device memory, by the numeric HIP status
    "tf_rocm_alloc_1002": (
        "2019-05-02 10:00:00.000: E tensorflow/stream_executor/rocm/rocm_driver.cc:615] failed "
        "to allocate 15.90G (17071734784 bytes) from device: hipError_t(1002)\n",
        Category.APPLICATION,
        Kind.CRASH,
    ),
    "hip_memory_allocation_named": (
        "RuntimeError: hipMalloc failed: hipErrorMemoryAllocation\n",
        Category.APPLICATION,
        Kind.CRASH,
    ),
    # tensorstore's object-store transfer under the low-speed limit: the store
    "tensorstore_low_speed": (
        "W0512 07:29:27.000000  41 curl_transport.cc:390] Error [28]=Operation too slow in "
        "curl operation\n",
        Category.STORAGE,
        Kind.HANG,
    ),
    "tensorstore_status_curl_28": (
        'jax.errors: ValueError: DEADLINE_EXCEEDED: Error reading "manifest.ocdbt" in '
        "gs://bucket/ckpt/40000: CURL error [28] Timeout was reached\n",
        Category.STORAGE,
        Kind.HANG,
    ),
    # a native program's own assert(): its check on its data or configuration
    "darknet_assert": (
        "darknet: ./src/parser.c:1021: load_weights_upto: Assertion `fread(...) == n' failed.\n"
        "Aborted (core dumped)\n",
        Category.APPLICATION,
        Kind.CRASH,
    ),
    "cpp_solver_assert": (
        "[node3:2211] *** Process received signal ***\n"
        "lbm_run: src/lattice.cpp:412: void Lattice::stream(): Assertion `nx % ranks == 0' "
        "failed.\n"
        "[node3:2211] Signal: Aborted (6)\n",
        Category.APPLICATION,
        Kind.CRASH,
    ),
    # a traceback cut inside a device management tool's query: the driver or firmware
    "pynvml_query_cut": (
        "Traceback (most recent call last):\n"
        '  File "/opt/monitor/gpu_probe.py", line 40, in <module>\n'
        "    temps = read_all()\n"
        '  File "/opt/monitor/gpu_probe.py", line 22, in read_all\n'
        "    h = pynvml.nvmlDeviceGetHandleByIndex(i)\n"
        '  File "/usr/lib/python3/dist-packages/pynvml.py", line 1966, in '
        "nvmlDeviceGetHandleByIndex\n"
        "    _nvmlCheckReturn(ret)\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    "amdsmi_query_cut": (
        "$ amd-smi metric\n"
        "Traceback (most recent call last):\n"
        '  File "/opt/rocm/bin/amd-smi", line 7, in <module>\n'
        "    main()\n"
        '  File "/opt/rocm/libexec/amdsmi_cli/amdsmi_commands.py", line 1210, in metric\n'
        "    ecc = amdsmi_interface.amdsmi_get_gpu_total_ecc_count(handle)\n"
        '  File "/usr/lib/python3/site-packages/amdsmi/amdsmi_interface.py", line 2440, in '
        "amdsmi_get_gpu_total_ecc_count\n"
        "    _check_res(\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    # one collective over a group and over part of it, the whole group ten times slower
    "profile_group_spanning_nodes": (
        "(MeshHostWorker pid=9120) AllGather: [[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, "
        "14, 15]]  Bytes: 1.00000 GB  Time: 0.51200 s  Bandwidth: 1.95 GB/s\n"
        "(MeshHostWorker pid=9120) AllGather: [[0, 1, 2, 3, 4, 5, 6, 7]]  Bytes: 1.00000 GB  "
        "Time: 0.00700 s  Bandwidth: 142.80 GB/s\n",
        Category.NETWORK_HARDWARE,
        Kind.STRAGGLER,
    ),
    "script_ranks_and_busbw": (
        "all_reduce ranks [0, 1, 2, 3, 4, 5, 6, 7] size 512MB busbw 18.2 Gbps\n"
        "all_reduce ranks [0, 1, 2, 3] size 512MB busbw 96.5 GB/s\n",
        Category.NETWORK_HARDWARE,
        Kind.STRAGGLER,
    ),
}

_HEALTHY: dict[str, str] = {
    # a GPU that posted and initialised
    "amdgpu_posted": (
        "amdgpu 0000:c4:00.0: amdgpu: GPU posting now...\n"
        "[drm] Initialized amdgpu 3.57.0 20150101 for 0000:c4:00.0 on minor 1\n"
    ),
    # the kernel's probe-time bandwidth notice: a GPU idles its link at Gen1
    "kernel_bandwidth_notice": (
        "pci 0000:41:00.0: 31.504 Gb/s available PCIe bandwidth, limited by 2.5 GT/s PCIe x16 "
        "link at 0000:40:01.1 (capable of 252.048 Gb/s with 16.0 GT/s PCIe x16 link)\n"
    ),
    # slurmd that found its library and detected the GPUs
    "slurmd_rsmi_loaded": (
        "slurmd: gpu/rsmi: init: GPU RSMI plugin loaded\n"
        "slurmd: debug:  Including the following config-only GPU:\n"
        "slurmd: Gres Name=gpu Type=mi300x Count=8\n"
    ),
    # a link's pre-correction error counts, all corrected: what FEC is for
    "mlxlink_raw_errors_corrected": (
        "Effective Physical Errors : 0\n"
        "Effective Physical BER : 15E-255\n"
        "Raw Physical Errors Per Lane : 1204,0,88,3\n"
    ),
    "pre_fec_error_count": ("Pre-FEC errors: 48211\nPost-FEC errors: 0\n"),
    # inter-node collectives within a few times of the intra-node ones: a healthy fabric
    "group_within_a_few_times": (
        "AllReduce: [[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]]  Bytes: 2.00000 GB"
        "  Time: 0.01900 s  Bandwidth: 105.20 GB/s\n"
        "AllReduce: [[0, 1, 2, 3, 4, 5, 6, 7]]  Bytes: 2.00000 GB  Time: 0.00900 s  "
        "Bandwidth: 222.10 GB/s\n"
    ),
    # groups that do not contain one another, and different message sizes: nothing to compare
    "disjoint_groups_and_other_sizes": (
        "AllReduce: [[0, 1, 2, 3]]  Bytes: 2.00000 GB  Time: 0.5 s  Bandwidth: 4.00 GB/s\n"
        "AllReduce: [[4, 5, 6, 7]]  Bytes: 2.00000 GB  Time: 0.01 s  Bandwidth: 200.00 GB/s\n"
        "AllReduce: [[0, 1]]  Bytes: 8.00000 MB  Time: 0.001 s  Bandwidth: 8.00 GB/s\n"
    ),
    # a hardware check with real thresholds and parts within them
    "hpasm_all_ok": (
        "OK - System: 'proliant dl380 gen10', hardware working fine\n"
        "checking temperatures\n1 ambient temperature is 21C (42 max)\n"
    ),
}

test_mechanism_family = family_test(_FAILURES)


test_healthy_counter_case = healthy_test(_HEALTHY)


# Lines that look alike but carry another cause: they must not be read as the new mechanism.
_NOT_THIS_MECHANISM: dict[str, tuple[str, str]] = {
    # a hot part over a real limit: the part, not the check's threshold
    "part_over_a_real_limit": (
        "CRITICAL - 2 cpu temperature too high (97C, 95 max)\n",
        "monitor.check_against_unset_threshold",
    ),
    # a process's own bad access (its VMID and PASID): the job's kernel
    "fault_in_a_process_vm": (
        "amdgpu 0000:c1:00.0: amdgpu: [gfxhub] page fault (src_id:0 ring:24 vmid:3 "
        "pasid:32771, for process python pid 9912 thread python pid 9912)\n",
        "amdgpu.page_fault_outside_any_process",
    ),
    # an assert inside a native library the interpreter loaded: not the program's own check
    "assert_in_a_runtime_under_python": (
        "python3: /opt/workspace/KaenaRuntime/tdrv/encd.c:4147: prep_metaring_topsp_config: "
        "Assertion `spe != NULL' failed.\n",
        "native.program_assert_failed",
    ),
    # a download in a set-up script that timed out: not an object store under the job
    "curl_cli_timeout": (
        "curl: (28) Operation timed out after 300000 milliseconds with 0 bytes received\n",
        "storage.object_transfer_stalled",
    ),
    # a device node that answers EIO: the device, not a firmware tool's access
    "device_node_io_error": (
        "Failed to open device /dev/nvidia3: Input/output error\n",
        "monitor.nic_firmware_tool_cannot_open",
    ),
    # a traceback cut in the program's own code that called the tool: the program
    "cut_in_the_callers_code": (
        "Traceback (most recent call last):\n"
        '  File "/opt/monitor/gpu_probe.py", line 40, in <module>\n'
        "    temps = read_all()\n"
        '  File "/opt/monitor/gpu_probe.py", line 25, in read_all\n'
        "    out[i] = parse(raw)\n",
        "",
    ),
    # a firmware file the driver could not find: the driver's package, not the VBIOS
    "firmware_file_missing": (
        "amdgpu 0000:03:00.0: Direct firmware load for amdgpu/gc_11_0_0_mes.bin failed with "
        "error -2\namdgpu 0000:03:00.0: amdgpu: Fatal error during GPU init\n",
        "gpu.vbios_tables_failed",
    ),
}


@pytest.mark.parametrize("name", sorted(_NOT_THIS_MECHANISM))
def test_lookalikes_are_not_the_mechanism(tmp_path: Path, name: str) -> None:
    """A lookalike's root cause is not the mechanism's signature (an empty name: no verdict of
    the platform's software for a cut traceback)."""
    text, signature = _NOT_THIS_MECHANISM[name]
    verdict = verdict_of(tmp_path, text)
    if not signature:
        assert verdict.category is not Category.SYSTEM_SOFTWARE, (name, verdict)
        return
    assert verdict.root_cause is None or verdict.root_cause.signature != signature, (
        name,
        verdict,
    )


_GUESSES = (
    "radeon_atombios_stuck",
    "uefi_link_width_not_optimal",
    "tt_flash_arc_boot",
    "mmhub_faults_no_process",
    "smi_no_csv_data",
    "flint_cannot_open",
    "hpasm_unset_threshold",
    "tensorstore_low_speed",
    "darknet_assert",
)


@pytest.mark.parametrize("name", _GUESSES)
def test_these_readings_stay_guesses(tmp_path: Path, name: str) -> None:
    """A BIOS that did not run, a link trained low, firmware that did not boot, faults of no
    process, a tool that got nothing, an alarm on a sentinel, a stalled transfer, an assert:
    each names its part or program usually, not always (a dying card stops its firmware too,
    an assert can guard a library's contract): restart, never stop or drain on these."""
    verdict = verdict_of(tmp_path, _FAILURES[name][0])
    assert verdict.confidence < 0.5, (name, verdict)


def test_an_effective_error_count_stays_evidence(tmp_path: Path) -> None:
    """Errors left after correction are the link's: only the raw count is vetoed."""
    verdict = verdict_of(
        tmp_path,
        "Effective Physical Errors : 12\nRaw Physical Errors Per Lane : 26711,0,0,9108\n",
    )
    assert verdict.failure, verdict
