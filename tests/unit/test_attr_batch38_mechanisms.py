"""Mechanisms read after batch38..batch39's first sight: each a family of messages (other
tools' and versions' wordings of the same failure) with healthy counter-cases, never one log's
lines (the batches' own logs are scored by test_attr_realworld's floors)."""

from __future__ import annotations

from pathlib import Path

from tests.unit.log_verdict import (
    family_test,
    healthy_test,
    verdict_of,
)

from trainmedic.core.model import Category, Kind


def _cqe_dump(host: str, last_row: str) -> str:
    """libmlx5's error CQE dump: a header, then 64 bytes as four rows of four words."""
    zeros = "00000000 00000000 00000000 00000000\n"
    return f"mlx5: {host}: got completion with error:\n{zeros * 3}{last_row}\n"


_FAILURES: dict[str, tuple[str, Category, Kind]] = {
    # libmlx5's dump names no status: the CQE's syndrome byte does (0x13 remote access, 0x04
    # local protection: memory registration or queue-pair use, the software stack)
    "cqe_dump_remote_access": (
        _cqe_dump("cn041", "00000000 00008813 08031011 0008acd2"),
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    "cqe_dump_local_protection": (
        "[1,3]<stderr>:" + _cqe_dump("gpu-17", "00000000 00005604 0a0004c1 00010bd2"),
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    # 0x15 transport retry exceeded, 0x16 RNR retry exceeded: the link or the peer's NIC
    "cqe_dump_retry_exceeded": (
        _cqe_dump("node-a3", "00000000 00008115 0a00a2c1 0001a0d2"),
        Category.NETWORK_HARDWARE,
        Kind.CRASH,
    ),
    "cqe_dump_rnr_retry": (
        _cqe_dump("hpc12.cluster", "00000000 00001216 08000dd0 0000f1d2"),
        Category.NETWORK_HARDWARE,
        Kind.CRASH,
    ),
    # Open MPI's openib BTL: the status in capitals with its number
    "openib_remote_access": (
        "[[2211,1],4][btl_openib_component.c:3644:handle_wc] from n031 to: n044 error polling "
        "LP CQ with status REMOTE ACCESS ERROR status number 10 for wr_id 1c8e40 opcode 2  "
        "vendor error 136 qp_idx 0\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    "openib_local_length": (
        "[[907,1],0][btl_openib_component.c:3497:handle_wc] from c1 to: c2 error polling HP CQ "
        "with status LOCAL LENGTH ERROR status number 1 for wr_id 9a10 opcode 128  vendor "
        "error 105 qp_idx 1\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    "openib_retry_exceeded": (
        "[[5397,1],7][btl_openib_component.c:3529:handle_wc] from gpu03 to: gpu11 error "
        "polling LP CQ with status RETRY EXCEEDED ERROR status number 12 for wr_id 3c7d00 "
        "opcode 0  vendor error 129 qp_idx 3\n",
        Category.NETWORK_HARDWARE,
        Kind.CRASH,
    ),
    # the firmware's power-on self-test halting on a drive's self-assessment (before any OS)
    "post_smart_status_bad": (
        "Dell PowerEdge R7525\nBIOS Version: 2.14.1\n  INTEL SSDPE2KX040T8\n"
        "  S.M.A.R.T Status BAD, Backup and Replace.\n  Press F1 to Resume, F2 to Run Setup\n",
        Category.STORAGE,
        Kind.CRASH,
    ),
    "post_smart_status_colon": (
        "SATA Port 2: ST4000NM0035-1V4107\nSMART Status: Bad\nPress F1 to continue\n",
        Category.STORAGE,
        Kind.CRASH,
    ),
    "post_hp_imminent_failure": (
        "1720-S.M.A.R.T. Hard Drive Detects Imminent Failure\n  Port 1I: Box 1: Bay 3\n",
        Category.STORAGE,
        Kind.CRASH,
    ),
    # a launcher or autoscaler with no offering for the request: the job is never placed
    "skypilot_no_resource": (
        "I 03-02 11:04:51 optimizer.py:1201] No resource satisfying <Cloud>({'H100': 3}) on GCP.\n",
        Category.SCHEDULER,
        Kind.CRASH,
    ),
    "ray_autoscaler_no_node_type": (
        "(autoscaler +41s) Tip: use `ray status` to view detailed cluster status.\n"
        "(autoscaler +41s) Error: No available node types can fulfill resource request "
        "{'GPU': 16.0, 'CPU': 1.0}. Add suitable node types to this cluster to resolve this "
        "issue.\n",
        Category.SCHEDULER,
        Kind.CRASH,
    ),
    "dstack_no_offers": (
        " No matching instance offers available. Possible reasons: "
        "https://dstack.ai/docs/guides/troubleshooting/#no-offers\n",
        Category.SCHEDULER,
        Kind.CRASH,
    ),
    # libnvidia-container's driver service (its RPC child to the driver) killed on a timeout
    "nvc_driver_service_forced": (
        "I0402 10:11:09.100000 811 nvc.c:376] initializing library context (version=1.13.5)\n"
        "I0402 10:11:09.200000 815 driver.c:101] starting driver rpc service\n"
        "W0402 10:11:34.210000 811 driver.c:195] terminating driver service (forced)\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    # collective timeouts only inside an inference engine's workers: the engine's collectives
    "engine_ray_worker_timeout": (
        "(RayWorkerWrapper pid=88121, ip=10.4.0.7) [rank2]:[E ProcessGroupNCCL.cpp:563] "
        "[Rank 2] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=12004, "
        "OpType=ALLREDUCE, NumelIn=16384, NumelOut=16384, Timeout(ms)=600000) ran for 600114 "
        "milliseconds before timing out.\n",
        Category.SYSTEM_SOFTWARE,
        Kind.HANG,
    ),
    "engine_mp_worker_timeout": (
        "(VllmWorkerProcess pid=4410) [rank1]:[E1104 03:12:55.120000 ProcessGroupNCCL.cpp:616] "
        "[Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=903, "
        "OpType=GATHER, NumelIn=32000, NumelOut=0, Timeout(ms)=600000) ran for 600051 "
        "milliseconds before timing out.\n",
        Category.SYSTEM_SOFTWARE,
        Kind.HANG,
    ),
    # the AWS SDK for C++ (pyarrow, TensorFlow, Arrow) failing the transfer itself
    "pyarrow_s3_network": (
        "Traceback (most recent call last):\n"
        '  File "pyarrow/_fs.pyx", line 1185, in pyarrow._fs.FileSystem.open_input_stream\n'
        "OSError: When reading information for key 'shards/part-00017.parquet' in bucket "
        "'corpus': AWS Error NETWORK_CONNECTION during HeadObject operation: curlCode: 28, "
        "Timeout was reached\n",
        Category.STORAGE,
        Kind.CRASH,
    ),
    "arrow_s3_unavailable": (
        "pyarrow.lib.ArrowIOError: When reading information for key 'x' in bucket 'y': AWS "
        "Error SERVICE_UNAVAILABLE during GetObject operation: Service Unavailable\n",
        Category.STORAGE,
        Kind.CRASH,
    ),
    # a Ray Data read operator's task raising an I/O error: reading the dataset failed
    "ray_data_read_parquet_oserror": (
        "Traceback (most recent call last):\n"
        "ray.exceptions.RayTaskError(OSError): ray::ReadParquet->SplitBlocks(4)() (pid=4121, "
        "ip=10.0.12.9)\n",
        Category.STORAGE,
        Kind.CRASH,
    ),
    # a launcher failing its own set-up of the nodes: the provisioner's exception below it is
    # the launcher's, not the job's
    "skypilot_runtime_setup": (
        "⚙︎ Launching on AWS us-east-1 (us-east-1a)\n"
        "⨯ Failed to set up SkyPilot runtime on cluster.  View logs: sky api logs -l "
        "sky-2025-03-01-08-00-00-000001/provision.log\n"
        "AssertionError: head node ip should not be None\n",
        Category.SCHEDULER,
        Kind.CRASH,
    ),
    "ray_launcher_update_failed": (
        "2024-05-02 10:11:12,001 INFO updater.py:374 -- NodeUpdater: i-0ab12 (10.0.1.4): Error "
        "executing: Command failed. New status: update-failed\n"
        "Failed to setup head node.\n",
        Category.SCHEDULER,
        Kind.CRASH,
    ),
}

_HEALTHY: dict[str, str] = {
    "launcher_set_up": (
        "✓ SkyPilot runtime is up.\n"
        "2024-05-02 10:11:12,001 INFO updater.py:374 -- New status: up-to-date\n"
    ),
    "nvc_clean_shutdown": (
        "I0402 10:11:09.200000 815 driver.c:101] starting driver rpc service\n"
        "I0402 10:11:12.000001 811 driver.c:195] terminating driver service\n"
        "I0402 10:11:12.090000 811 driver.c:235] driver service terminated successfully\n"
    ),
    "launcher_placed": (
        "I 03-02 11:04:51 optimizer.py:691] == Optimizer ==\n"
        "(autoscaler +1m) Adding 2 node(s) of type gpu_worker.\n"
        "Launching on GCP us-central1 (us-central1-a)\n"
    ),
    "post_smart_status_good": (
        "  SAMSUNG MZ7LH960\n  S.M.A.R.T Status Good\nSMART Status: OK\nBooting from disk 0\n"
    ),
    # a dump cut after its header decodes nothing; rows of zeros outside a dump are no CQE
    "hex_rows_without_header": "00000000 00000000 00000000 00000000\n" * 4,
    "openib_poll_success": (
        "[[2211,1],4] btl_openib: polled CQ with status SUCCESS status number 0 for wr_id 1c8e40\n"
    ),
}


test_mechanism_family = family_test(_FAILURES)


test_healthy_counter_case = healthy_test(_HEALTHY)


def test_an_unplaceable_request_stays_a_guess(tmp_path: Path) -> None:
    """SkyPilot prints the line per cloud and may launch on another: never above 0.5."""
    text, _, _ = _FAILURES["skypilot_no_resource"]
    assert verdict_of(tmp_path, text).confidence < 0.5


def test_a_training_job_timeout_alone_stays_the_application(tmp_path: Path) -> None:
    """The same timeout in a training job's own rank (no engine worker prefix) is still the
    ranks' code apart, as a guess."""
    text = (
        "[rank2]:[E ProcessGroupNCCL.cpp:563] [Rank 2] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=12004, OpType=ALLREDUCE, NumelIn=16384, NumelOut=16384, "
        "Timeout(ms)=600000) ran for 600114 milliseconds before timing out.\n"
    )
    verdict = verdict_of(tmp_path, text)
    assert verdict.category is Category.APPLICATION, verdict
    engine, _, _ = _FAILURES["engine_ray_worker_timeout"]
    assert verdict_of(tmp_path, engine).confidence < 0.5


def test_a_driver_service_timeout_stays_a_guess(tmp_path: Path) -> None:
    """A GPU that stopped answering times the runtime's driver service out too: never above
    0.5, and the runtime's line yields to the GPU's own ERR! row printed right below it."""
    text, _, _ = _FAILURES["nvc_driver_service_forced"]
    assert verdict_of(tmp_path, text).confidence < 0.5
    smi = (
        "|   0  ERR!                On   | 00000000:19:00.0 Off |                 ERR! |\n"
        "|ERR!  ERR! ERR!    ERR! / ERR! |      0MiB / 46068MiB |    ERR!      Default |\n"
    )
    verdict = verdict_of(tmp_path, text + smi)
    assert verdict.category is Category.GPU_HARDWARE, verdict


def test_a_credential_refusal_is_not_the_store_failing(tmp_path: Path) -> None:
    """ACCESS_DENIED is the job's credentials or policy, not the transfer: not this entry."""
    verdict = verdict_of(
        tmp_path,
        "OSError: When getting information for key 'ckpt' in bucket 'runs': AWS Error "
        "ACCESS_DENIED during HeadObject operation: No response body.\n",
    )
    assert "remote_fs_client_failed" not in verdict.basis, verdict


def test_a_value_error_in_a_read_task_is_no_storage(tmp_path: Path) -> None:
    """A fused map's own exception (ValueError) is the user's code, not the read."""
    verdict = verdict_of(
        tmp_path,
        "ray.exceptions.RayTaskError(ValueError): ray::ReadParquet->MapBatches(tok)() "
        "(pid=811, ip=172.31.9.4)\n",
    )
    assert verdict.category is not Category.STORAGE, verdict


def test_a_flushed_cqe_names_no_side(tmp_path: Path) -> None:
    """0x05 (work request flushed) only follows another error: the dump alone is no fabric."""
    verdict = verdict_of(tmp_path, _cqe_dump("cn7", "00000000 0000f905 08000041 0000d1d2"))
    assert "cqedump" not in verdict.basis, verdict
