"""Mechanisms batch20 and batch21 taught, each tested on lines in other shapes (or other tools)
than the batches', and on healthy lines of the same kind, which must stay as they were.

A dynamic loss scaler driven below 1 in a falling run of skips: the unscaled fp16 gradients
overflow, the run diverged (application). A drive's SMART counters that grew (pending or
offline-uncorrectable sectors, an ATA or self-test error log) is the failing disk (storage).
Exit status 127 is the shell's "command not found" (system_software). A failed connection to
a host-local address (docker0's 172.17.0.1, the hostname's 127.0.1.1) is the network
configuration of the container or host (system_software). Windows' delay-load exceptions
(0xC06D007E/F) and a missing procedure entry point are the installation (system_software). A
gang scheduler holding a group below its minimum is the scheduler's policy (scheduler). An
``nvidia-smi -q`` Fabric section that completed without Success is the GPU outside its NVLink
domain (gpu_hardware).

Before the change every FAILURES case but the Windows entry point (which fell to the guessing
layers below 0.5) was "no failure" or another category: the Apex and DeepSpeed scalers none,
the smartd lines none or system_software guesses, the exit 127s node_hardware/unknown
guesses, the host-local connections unknown (``net.connection_refused``), the gang lines
system_software guesses, the Fabric block none. The HEALTHY cases were healthy before and
must stay so.
"""

from __future__ import annotations

from pathlib import Path

from log_verdict import family_test, healthy_test
from log_verdict import verdict_of as _verdict

from trainmedic.core.model import Category, Kind

_STEPS = "".join(f"step {s} loss {2.0 - s / 1000:.3f}\n" for s in range(1, 13))


def _smi_fabric(status: str, state: str = "Completed") -> str:
    """An ``nvidia-smi -q`` block of one GPU with its Fabric section (r560+ layout)."""
    return (
        "==============NVSMI LOG==============\n"
        "Driver Version                            : 570.124.06\n"
        "GPU 00000009:01:00.0\n"
        "    Product Name                          : NVIDIA GB200\n"
        "    Fabric\n"
        f"        State                             : {state}\n"
        f"        Status                            : {status}\n"
        "        CliqueId                          : 32766\n"
        "        ClusterUUID                       : 5f3b2c1e-9a7d-4c2b-8e11-0a9b7c6d5e4f\n"
        "        Health\n"
        "            Bandwidth                     : Full\n"
    )


FAILURES: dict[str, tuple[str, Category, Kind]] = {
    # Apex AMP's scaler halving below 1 after training had run (a DeepSpeed-free wording)
    "apex_scale_below_one": (
        _STEPS + "Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 0.5\n"
        "Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 0.25\n",
        Category.APPLICATION,
        Kind.CRASH,
    ),
    # DeepSpeed's fused optimiser with its floor lowered below 1
    "deepspeed_scale_below_one": (
        _STEPS + "[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 1, "
        "reducing to 0.5\n"
        "[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 0.5, reducing to 0.25\n",
        Category.APPLICATION,
        Kind.CRASH,
    ),
    # smartd through syslog, and smartctl's attribute table
    "smartd_offline_uncorrectable": (
        "Mar  3 04:12:01 gpu-7 smartd[1412]: Device: /dev/sdb [SAT], 8 Offline uncorrectable "
        "sectors\n",
        Category.STORAGE,
        Kind.CRASH,
    ),
    "smartd_self_test_log_grew": (
        "Mar  3 04:12:01 gpu-7 smartd[1412]: Device: /dev/nvme0, Self-Test Log error count "
        "increased from 0 to 1\n",
        Category.STORAGE,
        Kind.CRASH,
    ),
    "smartctl_pending_sectors_row": (
        "ID# ATTRIBUTE_NAME          FLAG     VALUE WORST THRESH TYPE      UPDATED  WHEN_FAILED "
        "RAW_VALUE\n"
        "197 Current_Pending_Sector  0x0012   100   100   000    Old_age   Always       -       "
        "16\n",
        Category.STORAGE,
        Kind.CRASH,
    ),
    # a CI step and a container hook whose command the shell could not find
    "ci_step_exit_127": (
        "Run ./scripts/gpu_check.sh\n##[error]Process completed with exit code 127.\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    # Gloo and c10d connecting to the hostname's Debian loopback, NCCL to docker0's gateway
    "gloo_connect_hostname_loopback": (
        "RuntimeError: [/opt/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:799] connect "
        "[127.0.1.1]:43817: Connection refused\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    "c10d_connect_docker_bridge": (
        "[W socket.cpp:601] [c10d] The client socket has failed to connect to "
        "[172.17.0.1]:29500 (errno: 110 - Connection timed out).\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    # the Windows loader's words for a missing DLL and a missing entry point
    "windows_module_not_found": (
        "Unhandled exception at 0x00007FFB1E2C4F99 (KernelBase.dll) in train.exe: "
        "0xC06D007E: Module not found.\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    "windows_entry_point_missing": (
        "The procedure entry point MPI_Comm_create_errhandler could not be located in the "
        "dynamic link library msmpi.dll.\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    # Volcano's event for a PodGroup below its minAvailable
    "volcano_gang_unschedulable": (
        "Events:\n  Type     Reason         Age   From     Message\n"
        "  Warning  Unschedulable  12s   volcano  1/2 tasks in gang unschedulable: pod group is "
        "not ready, 1 Pending, 2 minAvailable; Pending: 1 Unschedulable\n",
        Category.SCHEDULER,
        Kind.HANG,
    ),
    # nvidia-smi -q of a GPU whose fabric registration ended without Success
    "smi_fabric_status_not_success": (
        _smi_fabric("Timeout"),
        Category.GPU_HARDWARE,
        Kind.CRASH,
    ),
}

HEALTHY: dict[str, str] = {
    # a scaler probing up and back at healthy scales while training goes on
    "scaler_probing_at_healthy_scales": (
        _STEPS + "Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 32768.0\n"
        "Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 16384.0\n" + _STEPS
    ),
    # smartctl's table of a sound drive and smartd registering it
    "smart_sound_drive": (
        'smartd[1412]: Device: /dev/sda [SAT], is SMART capable. Adding to "monitor" list.\n'
        "197 Current_Pending_Sector  0x0012   100   100   000    Old_age   Always       -       0\n"
        "SMART overall-health self-assessment test result: PASSED\n"
    ),
    # checks that returned 0, and a loopback address in an INFO line
    "checks_returned_zero": (
        "INFO : Check check_gpu_count returned 0\nINFO : Check check_nvsmi_healthmon returned 0\n"
        "gpu-a:410:455 [0] NCCL INFO Bootstrap : Using eth0:172.17.0.2<0>\n" + _STEPS
    ),
    # a PodGroup that became ready
    "podgroup_ready": (
        "  Normal  Scheduled  4s  volcano  pod group is ready, 2 Running, 2 minAvailable\n" + _STEPS
    ),
    # the Fabric section of a registered GPU, and of one still registering
    "smi_fabric_success": _smi_fabric("Success"),
    "smi_fabric_in_progress": _smi_fabric("N/A", state="In Progress"),
}


test_mechanism_names_its_category = family_test(FAILURES)


test_healthy_lines_stay_healthy = healthy_test(HEALTHY)


def test_a_connection_refused_by_a_routable_peer_is_not_the_configuration(tmp_path: Path) -> None:
    verdict = _verdict(tmp_path, "connect() to 10.1.4.22 failed: Connection refused (111)\n")
    assert verdict.category is not Category.SYSTEM_SOFTWARE, verdict


def test_a_divergence_guess_never_stops_or_drains(tmp_path: Path) -> None:
    # a judgement from the log's shape: under the stop threshold
    verdict = _verdict(tmp_path, FAILURES["apex_scale_below_one"][0])
    assert verdict.confidence < 0.7, verdict
