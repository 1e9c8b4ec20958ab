"""Mechanisms read after batch56's and batch57's first sight (communication libraries and the
launchers around them: MPI's own error classes, its launchers' set-up, libfabric's
completions; node snapshots and SPANK plug-ins): each a family of messages (other libraries',
versions' and launchers' wordings of the same failure) with healthy or differently-caused
counter-cases, never one log's lines (the batches' own logs are scored by test_attr_realworld's
floors)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.unit.log_verdict import (
    family_test,
    healthy_test,
    verdict_of,
)

from trainmedic.core.model import Category, Kind
from trainmedic.core.signatures.matcher import default_matcher

_FAILURES: dict[str, tuple[str, Category, Kind]] = {
    # a receive posted smaller than the message that matched it: the program's sizes
    "mpich_message_truncated": (
        "Abort(403316238) on node 3 (rank 3 in comm 0): Fatal error in PMPI_Recv: Message "
        "truncated, error stack:\n"
        "PMPI_Recv(173)..........: MPI_Recv(buf=0x7ffe1c, count=16, MPI_INT, src=0, tag=7, "
        "MPI_COMM_WORLD, status=0x1) failed\n"
        "MPIDIG_handle_unexpected(278): Message truncated; 4096 bytes received but buffer "
        "size is 64\n",
        Category.APPLICATION,
        Kind.CRASH,
    ),
    "mpi4py_err_truncate": (
        "Traceback (most recent call last):\n"
        '  File "/home/u/halo.py", line 41, in <module>\n'
        "    comm.Recv(buf, source=left, tag=2)\n"
        '  File "mpi4py/MPI/Comm.pyx", line 300, in mpi4py.MPI.Comm.Recv\n'
        "mpi4py.MPI.Exception: MPI_ERR_TRUNCATE: message truncated\n",
        Category.APPLICATION,
        Kind.CRASH,
    ),
    # Open MPI / PRRTE counting fewer slots than ranks requested: the launcher's reading
    "orte_not_enough_slots": (
        "------------------------------------------------------------\n"
        "There are not enough slots available in the system to satisfy the 64 slots\n"
        "that were requested by the application:\n"
        "  ./lmp\n"
        "Either request fewer slots for your application, or make more slots available\n"
        "for use.\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    "orte_nodes_already_filled": (
        "srun: job 88121 has been allocated resources\n"
        "All nodes which are allocated for this job are already filled.\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    # Hydra's proxy failing to connect back to mpiexec: the launcher's address / firewall
    "intel_mpi_proxy_connect_back": (
        "[mpiexec@login2] Launch arguments: /usr/bin/srun -N 4 -n 4 hydra_bstrap_proxy\n"
        "[proxy:0:2@c14] main (../../../../../src/pm/i_hydra/proxy/proxy.c:1001): unable to "
        "connect to server login2 at port 40137 (check for firewalls!)\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    "hydra_sock_connect_no_route": (
        "[proxy:0:3@gpu07] HYDU_sock_connect (lib/utils/sock.c:112): unable to connect from "
        '"gpu07" to "gpu01" (No route to host)\n'
        "[proxy:0:3@gpu07] main (proxy/pmip.c:120): unable to connect to server gpu01 at port "
        "33801 (check for firewalls!)\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    # a completion cancelled under a rank blocked in MPI: the process stopped from outside
    "cray_mpich_cq_canceled_in_bcast": (
        "MPICH ERROR [Rank 502] [job id 9921.3] [Mon Mar  3 11:02:40 2025] [nid001122] - "
        "Abort(941) (rank 502 in comm 0): Fatal error in PMPI_Bcast: Other MPI error, error "
        "stack:\n"
        "MPIDI_Progress_test(97)..............:\n"
        "MPIDI_OFI_handle_cq_error(1042)......: OFI poll failed (ofi_events.c:1064:"
        "MPIDI_OFI_handle_cq_error:Input/output error - CANCELED)\n",
        Category.SCHEDULER,
        Kind.CRASH,
    ),
    "libfabric_readerr_ecanceled": (
        "libfabric:81220:1724000000::cxi:cq:cxip_cq_eq_progress():531<warn> fi_cq_readerr: "
        "err: FI_ECANCELED (125)\n",
        Category.SCHEDULER,
        Kind.CRASH,
    ),
    # the container runtime's plug-in unable to make its own runtime directory
    "pyxis_runtime_dir_chown": (
        "srun: error: task 0 launch failed: Plugin initialization failed\n"
        "slurmstepd: error: pyxis: couldn't chown /run/pyxis/1042: Operation not permitted\n"
        "slurmstepd: error: spank: required plugin spank_pyxis.so: init_post_opt() failed "
        "with rc=-1\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    "pyxis_runtime_dir_mkdir": (
        "[2024-02-01T08:00:01.112] [77.0] error: pyxis: couldn't mkdir /var/run/pyxis/2001: "
        "Permission denied\n"
        "[2024-02-01T08:00:01.112] [77.0] error: Plugin stack initialization failed.\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    # SIGILL: a binary built for another CPU (or placed on an older node): a guess
    "sigill_in_a_batch_script": (
        "/var/spool/slurm/job81/slurm_script: line 12: 51022 Illegal instruction     (core "
        "dumped) ./bin/align --threads 8 reads.fq\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    "absl_sigill_handler": (
        "*** SIGILL received at time=1712000000 on cpu 12 ***\n"
        "PC: @     0x7f3a1c2b4e10  (unknown)  xla::cpu::Kernel\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    # the boundary of the excerpt rule above: with one line of the job's own after NCCL's
    # rows, the job fell silent after its process group formed (a first-collective hang)
    "silent_after_init_with_the_jobs_line": (
        "n1:311:402 [0] NCCL INFO comm 0x55d1 rank 0 nranks 2 cudaDev 0 busId 1000 - Init "
        "COMPLETE\n"
        "n1:312:404 [1] NCCL INFO comm 0x55d2 rank 1 nranks 2 cudaDev 1 busId 2000 - Init "
        "COMPLETE\n"
        "All distributed processes registered. Starting with 2 processes\n",
        Category.SYSTEM_SOFTWARE,
        Kind.HANG,
    ),
}

_HEALTHY: dict[str, str] = {
    # NCCL's own rows pasted without a line of the job's: an excerpt, not a silent job
    "nccl_init_rows_alone": (
        "[1,9]<stdout>:trainer-1:31:601 [1] NCCL INFO comm 0x5611c2 rank 9 nranks 16 cudaDev 1 "
        "nvmlDev 1 busId 180 commId 0x1a2b3c - Init COMPLETE\n"
        "[1,2]<stdout>:trainer-0:24:588 [2] NCCL INFO comm 0x55e0a1 rank 2 nranks 16 cudaDev 2 "
        "nvmlDev 2 busId 190 commId 0x1a2b3c - Init COMPLETE\n"
        "[1,12]<stdout>:trainer-1:34:590 [4] NCCL INFO comm 0x55f7d3 rank 12 nranks 16 cudaDev 4 "
        "nvmlDev 4 busId 1b0 commId 0x1a2b3c - Init COMPLETE\n"
    ),
    # a host without an IMEX domain has no channel devices: an inventory answer
    "snapshot_without_imex_channels": (
        "===== gpu-12 | before | 2026-01-04T10:00:00Z =====\n"
        "$ nvidia-smi nvlink -e\n"
        "GPU 0: NVIDIA GB200\n"
        "\t Link 0: Replay Errors: 0\n"
        "\t Link 0: CRC Errors: 0\n"
        "$ ls -l /dev/nvidia-caps-imex-channels/channel0\n"
        "ls: cannot access /dev/nvidia-caps-imex-channels/channel0: No such file or directory\n"
    ),
    "imex_channel_stat_missing": (
        "node check: gpus=8 ok\n"
        "stat: cannot stat '/dev/nvidia-caps-imex-channels': No such file or directory\n"
        "node check: done\n"
    ),
    # PMIx's shared-memory store falling back to its hash store, and the job going on
    "pmix_dstore_lock_fallback_then_training": (
        "[n1:55120] PMIX ERROR: ERROR in file ../../../src/mca/gds/ds21/gds_ds21_lock_pthread.c "
        "at line 99\n"
        "[n2:61002] PMIX ERROR: ERROR in file ../../../src/mca/gds/ds21/gds_ds21_lock_pthread.c "
        "at line 99\n"
        "rank 0 of 2: starting training, 12 shards\n"
    ),
    "launcher_map_with_enough_slots": (
        " Data for JOB [41522,1] offset 0 Total slots allocated 144\n"
        " ========================   JOB MAP   ========================\n"
        " Data for node: nid001   Num slots: 72   Max slots: 0  Num procs: 72\n"
    ),
}

# Lines that look alike with another cause: these keep their own verdict.
_DIFFERENT_CAUSE: dict[str, tuple[str, Category]] = {
    "ofi_uncorrectable_transfer": (
        "MPIDI_OFI_handle_cq_error(1067): OFI poll failed (ofi_events.c:1069:"
        "MPIDI_OFI_handle_cq_error:Input/output error - UNCOR_TRNSNT)\n",
        Category.NETWORK_HARDWARE,
    ),
    "ofi_receive_side_refused": (
        "MPIDI_OFI_handle_cq_error(1062): OFI poll failed (ofi_events.c:1064:"
        "MPIDI_OFI_handle_cq_error:Input/output error - UNDELIVERABLE)\n",
        Category.SYSTEM_SOFTWARE,
    ),
    "pmix_server_unreachable": (
        "[gpu-n17:48812] PMIX ERROR: UNREACHABLE in file server/pmix_server.c at line 2198\n",
        Category.SYSTEM_SOFTWARE,
    ),
    "gpu_kernel_illegal_instruction": (
        "RuntimeError: CUDA error: an illegal instruction was encountered\n",
        Category.APPLICATION,
    ),
    "nccl_socket_message_truncated": (
        "w1:301:377 [0] transport/net_socket.cc:412 NCCL WARN NET/Socket : message truncated : "
        "receiving 8192 bytes instead of 4096\n",
        Category.APPLICATION,
    ),
}

# A NIC driver's name in a failure line no signature knows points at the fabric; the same
# letters inside a path or a hyphenated software tree do not.
_DRIVER_WORDS: dict[str, tuple[str, bool]] = {
    "ice_driver_line": ("ice 0000:86:00.0: Failed to get link status\n", True),
    "i40e_driver_line": (
        "[ 812.11] i40e 0000:3b:00.1: failed to reset the adapter, error -5\n",
        True,
    ),
    "software_tree_named_ice": (
        "follower 2 encountered error: === Backtrace ===\n"
        "/apps/live/EL8-ice/software/RELION/bin/relion_refine_mpi() [0x4a5741]\n",
        False,
    ),
    "script_dir_named_ice": ("Error: /opt/net-ice/tools/check.sh failed\n", False),
}

# Lines a new entry must not read as its own (signature id, line).
_NEAR_MISSES: tuple[tuple[str, str], ...] = (
    ("mpi.message_truncated", "WARNING: log message truncated to 4096 characters"),
    ("mpi.message_truncated", "[node1:1234] *** An error occurred in MPI_Recv"),
    ("mpi.not_enough_slots", "Either request fewer slots for your application, or make more"),
    (
        "mpi.launcher_connect_back_failed",
        "[proxy:0:1@n4] HYDU_sock_write (utils/sock/sock.c:256): write error (Broken pipe)",
    ),
    (
        "mpi.ofi_completion_canceled",
        "MPIDI_OFI_handle_cq_error(1042): OFI poll failed (ofi_events.c:1042:"
        "MPIDI_OFI_handle_cq_error:Input/output error)",
    ),
    ("mpi.ofi_completion_canceled", "srun: Job step aborted: Waiting up to 32 seconds"),
    (
        "env.container_runtime_setup",
        "mkdir: cannot create directory '/run/user/1042': Permission denied",
    ),
    (
        "mpi.pmix_dstore_lock_fallback",
        "[n2:9911] PMIX ERROR: ERROR in file ../../src/mca/gds/ds12/gds_dstore.c at line 1245",
    ),
    ("mpi.runtime_init_failed", "PMIX ERROR: ERROR in file gds_ds12_lock_pthread.c at line 168"),
    ("node.no_imex_channels", "/usr/bin/ls: cannot access '/dev/nvidia0': No such file"),
    ("env.illegal_instruction", "RuntimeError: CUDA error: an illegal instruction was encountered"),
)


test_mechanism_family = family_test(_FAILURES)


test_healthy_counter_case = healthy_test(_HEALTHY)


@pytest.mark.parametrize("name", sorted(_DIFFERENT_CAUSE))
def test_look_alikes_keep_their_cause(tmp_path: Path, name: str) -> None:
    text, category = _DIFFERENT_CAUSE[name]
    verdict = verdict_of(tmp_path, text)
    assert verdict.failure, (name, verdict)
    assert verdict.category is category, (name, verdict)


@pytest.mark.parametrize("name", sorted(_DRIVER_WORDS))
def test_nic_driver_names_only_as_words(tmp_path: Path, name: str) -> None:
    text, fabric = _DRIVER_WORDS[name]
    verdict = verdict_of(tmp_path, text)
    assert verdict.failure, (name, verdict)
    assert (verdict.category is Category.NETWORK_HARDWARE) is fabric, (name, verdict)


@pytest.mark.parametrize(("signature_id", "line"), _NEAR_MISSES)
def test_near_misses_are_not_the_entry(signature_id: str, line: str) -> None:
    assert signature_id not in {h.signature.id for h in default_matcher().match(line)}


_GUESSES = (
    "orte_not_enough_slots",
    "orte_nodes_already_filled",
    "intel_mpi_proxy_connect_back",
    "hydra_sock_connect_no_route",
    "cray_mpich_cq_canceled_in_bcast",
    "libfabric_readerr_ecanceled",
    "sigill_in_a_batch_script",
    "absl_sigill_handler",
)


@pytest.mark.parametrize("name", _GUESSES)
def test_these_readings_stay_guesses(tmp_path: Path, name: str) -> None:
    """A launcher's count or connection, a cancelled transfer and a SIGILL each read the same
    with another cause (a request larger than the allocation, a launching host that went
    away, a rank stopped by a peer's abort, a node of the wrong CPU generation): the policy
    restarts, never stops or drains on these."""
    verdict = verdict_of(tmp_path, _FAILURES[name][0])
    assert verdict.confidence < 0.5, (name, verdict)
