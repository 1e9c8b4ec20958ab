"""Mechanisms read after batch44..batch45's first sight: each a family of messages (other
tools' and versions' wordings of the same failure) with healthy or differently-caused
counter-cases, never one log's lines (the batches' own logs are scored by
test_attr_realworld's floors)."""

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
    # NCCL 2.2x's wording of an IB port going to error ("async error event")
    "ib_port_error_new_wording": (
        "[2025-01-04 10:11:12] gpu-a3:4410:4502 [3] transport/net_ib.cc:212 NCCL WARN NET/IB "
        ": mlx5_4:1 Got async error event: port error\n",
        Category.NETWORK_HARDWARE,
        Kind.CRASH,
    ),
    "ib_port_flap_new_wording": (
        "node7:901:977 [1] NCCL WARN NET/IB : mlx5_bond_0:1 Got async error event: port error\n"
        "node7:901:977 [1] NCCL WARN NET/IB : mlx5_bond_0:1 Got async error event: port active\n",
        Category.NETWORK_HARDWARE,
        Kind.CRASH,
    ),
    # MPICH's OFI netmod: a completion the fabric failed (the errno is libfabric's, not a disk's)
    "mpich_ofi_poll_eio": (
        "Abort(403275023) on node 12 (rank 12 in comm 0): Fatal error in PMPI_Allreduce: Other "
        "MPI error, error stack:\n"
        "MPIDI_OFI_handle_cq_error(1059): OFI poll failed (ofi_events.c:1061:"
        "MPIDI_OFI_handle_cq_error:Input/output error)\n",
        Category.NETWORK_HARDWARE,
        Kind.CRASH,
    ),
    "mpich_ofi_poll_uncorrectable": (
        "MPIDI_OFI_handle_cq_error(1101): OFI poll failed (ofi_events.c:1103:"
        "MPIDI_OFI_handle_cq_error:Input/output error - UNCOR)\n",
        Category.NETWORK_HARDWARE,
        Kind.CRASH,
    ),
    # Slingshot CXI: the target's receive side refused the message (matching / flow control)
    "cxi_undeliverable_isend": (
        "MPICH ERROR [Rank 517] [job id 88123.0] [Mon Mar  4 02:11:09 2024] [nid004411] - "
        "Abort(942316559) (rank 517 in comm 0): Fatal error in PMPI_Wait: Other MPI error, "
        "error stack:\n"
        "MPIDI_OFI_handle_cq_error(1075): OFI poll failed (ofi_events.c:1077:"
        "MPIDI_OFI_handle_cq_error:Input/output error - UNDELIVERABLE)\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    "cxi_pt_disabled_rc": (
        "libfabric:51022:1712000000::cxi:core:cxip_send_cb():801<warn> x1000c2s3b0n1: send "
        "failed, rc: C_RC_PT_DISABLED\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    # a GPU-aware MPI unable to export its own buffer as a CUDA IPC handle
    "ompi_smcuda_get_handle": (
        "--------------------------------------------------------------------------\n"
        "The call to cuIpcGetMemHandle failed. This means the GPU RDMA protocol\n"
        "cannot be used.\n"
        "  cuIpcGetMemHandle return value:   201\n"
        "--------------------------------------------------------------------------\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    "gtl_get_handle": (
        "3: (GTL DEBUG: 3) cuIpcGetMemHandle: invalid argument, CUDA_ERROR_INVALID_VALUE, "
        "line no 184\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    # a library's private class missing its own private attribute
    "private_attribute_channel": (
        "Traceback (most recent call last):\n"
        '  File "/opt/venv/lib/python3.11/site-packages/ray/dag/compiled_dag_node.py", line '
        "2210, in teardown\n"
        "AttributeError: '_SharedMemoryChannel' object has no attribute '_reader_ref'\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    "private_attribute_type_object": (
        "AttributeError: type object '_GenericAlias' has no attribute '_special'\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    # a model path in a tool's own cache handed to the Hub as a repo id: its staging
    "repo_id_hf_snapshot_cache": (
        "huggingface_hub.errors.HFValidationError: Repo id must be in the form 'repo_name' or "
        "'namespace/repo_name': '/home/u/.cache/huggingface/hub/models--org--m/snapshots/ab12/'."
        " Use `repo_type` argument if needed.\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    "repo_id_tool_cache_wrapped": (
        "OSError: Incorrect path_or_model_id:\n'~/.cache/sglang/weights/7c0d1f'. Please provide "
        "either the path to a local folder or the repo_id of a model on the Hub.\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    # a user's own path: the job's set-up, as a guess
    "repo_id_user_path": (
        "OSError: /data/team/ckpt/final is not a local folder and is not a valid model "
        "identifier listed on 'https://huggingface.co/models'\n",
        Category.APPLICATION,
        Kind.CRASH,
    ),
    # molecular dynamics blowing up: the integration diverged
    "lammps_bad_fene": (
        "    4200    1.0124   -4.8812    0    -3.3634    0.7711\n"
        "ERROR on proc 3: Bad FENE bond (src/MOLECULE/bond_fene.cpp:82)\n",
        Category.APPLICATION,
        Kind.CRASH,
    ),
    "lammps_lost_atoms": (
        "ERROR: Lost atoms: original 256000 current 255871 (src/thermo.cpp:481)\n",
        Category.APPLICATION,
        Kind.CRASH,
    ),
    "gromacs_lincs": (
        "Step 40211, time 80.422 (ps)  LINCS WARNING\n"
        "relative constraint deviation after LINCS:\n"
        "rms 0.381726, max 7.412891 (between atoms 1123 and 1124)\n",
        Category.APPLICATION,
        Kind.CRASH,
    ),
}

_HEALTHY: dict[str, str] = {
    # the NIC's port coming (back) up is no failure
    "ib_port_active_only": (
        "node7:901:977 [1] NCCL WARN NET/IB : mlx5_0:1 Got async error event: port active\n"
        "node7:901:901 [1] NCCL INFO comm 0x55d0 rank 1 nranks 8 - Init COMPLETE\n"
        "step 100 | loss 2.8812 | lr 3.0e-04 | 412 samples/s\n"
        "step 200 | loss 2.5107 | lr 3.0e-04 | 415 samples/s\n"
        "Training completed. Saved final checkpoint.\n"
    ),
    # a LAMMPS run whose set-up warnings are about the input, not a divergence
    "lammps_setup_warning": (
        "WARNING: Communication cutoff 0 is shorter than a bond length based estimate. This "
        "may lead to errors. (src/comm.cpp:723)\n"
        "Step Temp E_pair E_mol TotEng Press\n"
        "       0    1.05   -4.7    0   -3.1   5.2\n"
        "    1000    1.02   -4.8    0   -3.3   0.9\n"
        "Loop time of 12.3 on 4 procs for 1000 steps with 32000 atoms\n"
        "Total wall time: 0:00:13\n"
    ),
    "model_loaded_from_cache": (
        "Loading weights from /root/.cache/huggingface/hub/models--org--m/snapshots/ab12\n"
        "Loading checkpoint shards: 100%|##########| 4/4 [00:03<00:00,  1.21it/s]\n"
    ),
}


test_mechanism_family = family_test(_FAILURES)


test_healthy_counter_case = healthy_test(_HEALTHY)


@pytest.mark.parametrize(
    "name",
    [
        "cxi_undeliverable_isend",
        "ompi_smcuda_get_handle",
        "private_attribute_channel",
        "repo_id_hf_snapshot_cache",
        "repo_id_user_path",
        "lammps_bad_fene",
    ],
)
def test_these_readings_stay_guesses(tmp_path: Path, name: str) -> None:
    """A peer that already died leaves no portal entry, a buffer from the job's own allocator,
    a private class of the job's own, a path the user typed, a time step too large for the
    input: each reads the same, so never above 0.5 (restart, never stop)."""
    text, _, _ = _FAILURES[name]
    verdict = verdict_of(tmp_path, text)
    assert verdict.confidence < 0.5, verdict


@pytest.mark.parametrize(
    "line",
    [
        # the job's own classes and attributes stay the job's
        "AttributeError: 'LlamaTrainer' object has no attribute '_loss_fn'",
        "AttributeError: '_ShardedLoader' object has no attribute 'batches'",
        "AttributeError: '_io.BufferedReader' object has no attribute '_cursor'",
    ],
)
def test_public_names_stay_the_application(tmp_path: Path, line: str) -> None:
    verdict = verdict_of(tmp_path, line + "\n")
    assert verdict.category is Category.APPLICATION, verdict
    assert "library_private_attribute" not in verdict.basis, verdict


def test_an_input_output_error_on_a_disk_stays_storage(tmp_path: Path) -> None:
    """Only the OFI netmod's line leaves storage.io_error: a file read failing with EIO is the
    disk's or the file system's whatever MPI-IO call made it."""
    text = (
        "MPI_File_read_at_all(92): Other I/O error , error stack:\n"
        "ADIOI_GEN_READCONTIG(178): Other I/O error Input/output error\n"
    )
    assert verdict_of(tmp_path, text).category is Category.STORAGE


def test_an_out_of_memory_export_is_not_the_ipc_set_up(tmp_path: Path) -> None:
    text = (
        "[gpu-3:811:0] cuda_ipc_md.c:104 UCX ERROR cuIpcGetMemHandle(&key->ph, addr) failed: "
        "out of memory\n"
    )
    assert "ipc_export_refused" not in verdict_of(tmp_path, text).basis
