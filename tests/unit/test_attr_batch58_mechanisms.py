"""Mechanisms read after batch58..batch59's first sight (Chinese-ecosystem accelerator stacks,
parameter-server and elastic training on Kubernetes): each a family of messages (other tools',
versions' and devices' wordings of the same failure) with near-misses that must stay apart,
never one log's lines (the batches' own logs are scored by test_attr_realworld's floors). Most
are one part of a job reporting a fault of another part: the card's own OS, a peer's
heartbeat, another task's checkpoint shard, the controller that lost a pod."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.unit.log_verdict import family_test, healthy_test, verdict_of

from trainmedic.core.model import Category, Kind

_FAILURES: dict[str, tuple[str, Category, Kind]] = {
    # an APEI memory-error record in an accelerator's own black box: the card's HBM
    "device_blackbox_multibit_record": (
        "report/2025-02-11/hisi_logs/device-6/20250211093000-5/bbox/kbox.txt:301[ 88.1] "
        "{2}[Hardware Error]  section_type: memory error\n"
        "report/2025-02-11/hisi_logs/device-6/20250211093000-5/bbox/kbox.txt:302[ 88.1] "
        "{2}[Hardware Error]  error_type: 3, multi-bit ECC\n",
        Category.GPU_HARDWARE,
        Kind.CRASH,
    ),
    "device_blackbox_fatal_record": (
        "/var/log/npu/hisi_logs/device0/20241105-7/bbox/kbox.txt:[ 9.5] {1}[Hardware Error]: "
        "event severity: fatal\n",
        Category.GPU_HARDWARE,
        Kind.CRASH,
    ),
    "hbm_patrol_event_wording": (
        "[fault_manager] device 4 event_name: Multi-bit ECC errors during the HBM patrol\n",
        Category.GPU_HARDWARE,
        Kind.CRASH,
    ),
    # HCCL's survivors reporting a peer that stopped: cascades, the cause is elsewhere
    "hccl_notify_wait_alone": (
        "EI0002: [PID: 812] 2025-04-02-08:00:01.100.200 The wait execution of the Notify "
        "register times out. Reason: The Notify register has not received the Notify record "
        "from remote rank [7].base information: [streamID:[3], taskID[12], taskType[Notify "
        "Wait], tag[AllGather_10.1.1.2%eth0_60000_0_1]]\n",
        Category.UNKNOWN,
        Kind.HANG,
    ),
    "hccl_heartbeat_lost_alone": (
        "there are(is) 1 abnormal device(s):\n"
        "Cluster Exception Location[IP/ID]:[10.0.3.14/6], Arrival Time:[Tue Jan 7 10:00:00 "
        "2025], Discoverer:[10.0.3.15/0], ExceptionType:[Heartbeat Lost Occurred], Possible "
        "Reason:1. Process has exited, 2. Network Disconnected\n",
        Category.UNKNOWN,
        Kind.CRASH,
    ),
    "mindspore_node_timed_out": (
        "[ERROR] DISTRIBUTED(77,fffe1,python):2025-05-02-11:00:00.000.1 "
        "[mindspore/ccsrc/distributed/cluster/topology/meta_server_node.cc:380] UpdateTopoState] "
        "The node: 5 is timed out. It may exit with exception, please check this node's log.\n",
        Category.UNKNOWN,
        Kind.CRASH,
    ),
    # a management tool that could not read one of the card's attributes
    "hy_smi_serial_file_error": (
        "$ hy-smi --showserial --json\n"
        "Error: Failed to show serial number: File read or write error.\n"
        "Warning: One or more commands failed\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    "amd_smi_file_error_status": (
        "amdsmi.amdsmi_exception.AmdSmiLibraryException: Error code: 3 | "
        "AMDSMI_STATUS_FILE_ERROR - Problem accessing a file\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    # a worker pod taken from outside the job
    "dlrover_ps_deleted": (
        "[2025-09-01 03:00:00,010] [INFO] [dist_job_manager.py:840:_process_event] "
        "train-edljob-ps-2 status change: Running to Deleted by the event DELETED. Exit reason "
        "is Deleted\n",
        Category.SCHEDULER,
        Kind.CRASH,
    ),
    "pod_disruption_condition": (
        "  conditions:\n"
        "  - lastTransitionTime: '2025-03-01T10:00:00Z'\n"
        "    message: 'Eviction API: evicting'\n"
        "    reason: EvictionByEvictionAPI\n"
        "    status: 'True'\n"
        "    type: DisruptionTarget\n",
        Category.SCHEDULER,
        Kind.CRASH,
    ),
    # a checkpoint piece another task of the run wrote, missing where this one reads it
    "tf_temp_shard_missing": (
        "tensorflow.python.framework.errors_impl.NotFoundError: /ckpt/run2/model.ckpt-2000_temp"
        "_0c9e1b7a5d3f4e2a8b6c4d2e0f1a3b5c/part-00002-of-00004.index; No such file or "
        "directory\n",
        Category.STORAGE,
        Kind.CRASH,
    ),
    "dcp_rank_file_missing": (
        "FileNotFoundError: [Errno 2] No such file or directory: "
        "'/nvme/job7/checkpoints/step_500/__12_0.distcp'\n",
        Category.STORAGE,
        Kind.CRASH,
    ),
    # a TF checkpoint save op named as the failing op
    "tf_save_op_new_style": (
        "tensorflow.python.framework.errors_impl.UnknownError: Failed to rename: "
        "/out/ckpt-40.index.tempstate123 to: /out/ckpt-40.index\n"
        "\t [[{{node save_2/SaveV2}}]]\n",
        Category.STORAGE,
        Kind.CRASH,
    ),
    "tf_merge_op_eager": (
        "tensorflow.python.framework.errors_impl.NotFoundError: /shared/model/ckpt-7_temp/part"
        "-00001-of-00002; No such file or directory [Op:MergeV2Checkpoints]\n",
        Category.STORAGE,
        Kind.CRASH,
    ),
    # the ranks entered their first collective and the log ends: stuck in NCCL's lazy setup
    "first_collective_device_guess_torch25": (
        "[rank0]:[W517 08:37:08.068871151 ProcessGroupNCCL.cpp:4715] [PG ID 0 PG GUID 0 Rank 0]  "
        "using GPU 0 as device used by this process is currently unknown. This can potentially "
        "cause a hang if this rank to GPU mapping is incorrect. You can pecify device_id in "
        "init_process_group() to force use of a particular device.\n"
        "[rank1]:[W517 08:37:08.069101223 ProcessGroupNCCL.cpp:4715] [PG ID 0 PG GUID 0 Rank 1]  "
        "using GPU 1 as device used by this process is currently unknown. This can potentially "
        "cause a hang if this rank to GPU mapping is incorrect. You can pecify device_id in "
        "init_process_group() to force use of a particular device.\n",
        Category.SYSTEM_SOFTWARE,
        Kind.HANG,
    ),
    "first_collective_barrier_warning_torch27": (
        "[INFO|2025-05-02 10:00:01] llamafactory.data.loader:157 >> Loading dataset alpaca.json\n"
        "/opt/venv/lib/python3.12/site-packages/torch/distributed/c10d_logger.py:83: "
        "UserWarning: barrier(): using the device under current context. You can specify "
        "`device_id` in `init_process_group` to mute this warning.\n"
        "  return func(*args, **kwargs)\n",
        Category.SYSTEM_SOFTWARE,
        Kind.HANG,
    ),
    "first_collective_rank_wording_torch1": (
        "[W ProcessGroupNCCL.cpp:1569] Rank 2 using GPU 2 to perform barrier as devices used by "
        "this process are currently unknown. This can potentially cause a hang if this rank to "
        "GPU mapping is incorrect.Specify device_ids in barrier() to force use of a particular "
        "device.\n",
        Category.SYSTEM_SOFTWARE,
        Kind.HANG,
    ),
}

_HEALTHY: dict[str, str] = {
    "hccl_collective_entry": (
        "[INFO] HCCL(4410,python):2025-03-01-10:11:12 [op_base.cc:301] Entry-HcclAllReduce: "
        "tag[AllReduce_10.0.0.1%eth0_60000_0], count[1024]\n"
        "step 10, loss 3.21\n"
    ),
    "rocm_smi_table": (
        "========== ROCm System Management Interface ==========\n"
        "GPU[0]\t\t: Unique ID: 0x6a1b2c3d4e5f\n"
        "GPU[0]\t\t: Average Graphics Package Power (W): 88.0\n"
        "================ End of ROCm SMI Log =================\n"
    ),
    "dlrover_worker_started": (
        "[2025-06-01 10:00:00,001] [INFO] [dist_job_manager.py:838:_process_event] "
        "job-edljob-worker-3 status change: Pending to Running by the event MODIFIED. \n"
        "[2025-06-01 10:05:00,001] [INFO] [training.py:1:log] global_step 100 loss 2.31\n"
    ),
    "tf_saving_checkpoints": (
        "INFO:tensorflow:Saving checkpoints for 100 into /train_dir/model.ckpt.\n"
        "INFO:tensorflow:global_step/sec: 4.1\n"
        "INFO:tensorflow:loss = 0.52, step = 200 (24.3 sec)\n"
    ),
    "device_guess_then_training": (
        "[rank0]:[W517 08:37:08.068871151 ProcessGroupNCCL.cpp:4715] [PG ID 0 PG GUID 0 Rank 0]  "
        "using GPU 0 as device used by this process is currently unknown. This can potentially "
        "cause a hang if this rank to GPU mapping is incorrect.\n"
        "Starting DDP training for 10 epochs...\n"
        "Epoch 1/10 step 50 loss 1.92\n"
        "Epoch 1/10 step 100 loss 1.71\n"
    ),
    "device_guess_then_many_lines": (
        "/opt/venv/lib/python3.12/site-packages/torch/distributed/c10d_logger.py:83: "
        "UserWarning: barrier(): using the device under current context. You can specify "
        "`device_id` in `init_process_group` to mute this warning.\n"
        "  return func(*args, **kwargs)\n"
        "INFO 05-19 02:40:22 [fp8.py:578] Using MoEPrepareAndFinalizeNoDPEPModular\n"
        "INFO 05-19 02:40:23 [gpu_model_runner.py:487] Model loading took 61.2 GiB\n"
        "INFO 05-19 02:40:30 [kv_cache_utils.py:716] GPU KV cache size: 1,249,001 tokens\n"
        "INFO 05-19 02:40:31 [core.py:171] init engine took 41.2 seconds\n"
        "INFO 05-19 02:40:32 [api_server.py:1090] Starting vLLM API server on port 8000\n"
    ),
}

# Lines that look alike with another cause: each keeps a verdict of its own, never the
# mechanism's signature (signature id, or None for "not the new finding at all").
_NEAR_MISSES: dict[str, tuple[str, str]] = {
    # the host's own APEI record: its DIMMs (node), not the card
    "host_apei_multibit": (
        "[  812.1] {2}[Hardware Error]: Hardware error from APEI Generic Hardware Error Source: 1\n"
        "[  812.1] {2}[Hardware Error]:  error_type: 3, multi-bit ECC\n"
        "[  812.1] {2}[Hardware Error]:  DIMM location: CPU_SrcID#0_MC#1_Chan#0_DIMM#0\n",
        "accel.device_os_memory_error",
    ),
    # what the host's DIMMs support, not an error (nor the card's)
    "dmidecode_memory_array": (
        "Physical Memory Array\n"
        "\tLocation: System Board Or Motherboard\n"
        "\tError Correction Type: Multi-bit ECC\n"
        "\tMaximum Capacity: 2 TB\n",
        "accel.device_os_memory_error",
    ),
    "device_blackbox_single_bit": (
        "/hisi_logs/device-1/20250102081500-1/bbox/kbox.txt:40[ 12.3] {1}[Hardware Error]  "
        "error_type: 2, single-bit ECC\n",
        "accel.device_os_memory_error",
    ),
    "checkpoint_write_file_error": (
        "2025-01-01 10:00:00 saving checkpoint to /data/ckpt/step_100\n"
        "ERROR: failed to save checkpoint: File read or write error\n",
        "smi.query_file_error",
    ),
    "dlrover_worker_oom": (
        "[2025-06-01 10:00:00,001] [INFO] [dist_job_manager.py:838:_process_event] "
        "job-edljob-worker-3 status change: Running to Failed by the event MODIFIED. Exit reason "
        "is OOMKilled\n",
        "k8s.pod_deleted_under_job",
    ),
    "users_missing_feature_file": (
        "Traceback (most recent call last):\n"
        '  File "/home/u/proj/train.py", line 40, in <module>\n'
        '    feats = h5py.File(args.features, "r")\n'
        "OSError: Unable to open file (unable to open file: name = 'data/features_v2.h5', "
        "errno = 2, error message = 'No such file or directory', flags = 0, o_flags = 0)\n",
        "ckpt.shard_not_visible",
    ),
    "tf_restore_key_missing": (
        "tensorflow.python.framework.errors_impl.NotFoundError: Key dense_3/kernel not found in "
        "checkpoint\n"
        '\t [[Node: save/RestoreV2 = RestoreV2[dtypes=[DT_FLOAT], _device="/job:localhost/'
        'replica:0/task:0/cpu:0"](_arg_save/Const_0_0, save/RestoreV2/tensor_names)]]\n',
        "tf.checkpoint_save_op_failed",
    ),
}

# The same lines beside a primary error that says more: the primary keeps the verdict.
_DIFFERENT_CAUSE: dict[str, tuple[str, Category]] = {
    "shape_error_before_notify_timeout": (
        "[rank3]: RuntimeError: mat1 and mat2 shapes cannot be multiplied (16x4096 and 2048x4096)\n"
        "EI0002: The wait execution of the Notify register times out. Reason: The Notify "
        "register has not received the Notify record from remote rank [3].\n",
        Category.APPLICATION,
    ),
    "device_guess_then_traceback": (
        "[rank1]:[W508 15:19:59.517997423 ProcessGroupNCCL.cpp:4715] [PG ID 0 PG GUID 0 Rank 1]  "
        "using GPU 1 as device used by this process is currently unknown. This can potentially "
        "cause a hang if this rank to GPU mapping is incorrect.\n"
        "Traceback (most recent call last):\n"
        '  File "/home/u/train.py", line 88, in <module>\n'
        "    loss = model(batch)\n"
        "RuntimeError: mat1 and mat2 shapes cannot be multiplied (8x512 and 1024x10)\n",
        Category.APPLICATION,
    ),
}


test_mechanism_family = family_test(_FAILURES)


test_healthy_counter_case = healthy_test(_HEALTHY)


@pytest.mark.parametrize("name", sorted(_NEAR_MISSES))
def test_near_misses_are_not_the_mechanism(tmp_path: Path, name: str) -> None:
    text, signature = _NEAR_MISSES[name]
    verdict = verdict_of(tmp_path, text)
    root = verdict.root_cause
    assert root is None or root.signature != signature, (name, verdict)


@pytest.mark.parametrize("name", sorted(_DIFFERENT_CAUSE))
def test_a_primary_error_keeps_its_verdict(tmp_path: Path, name: str) -> None:
    text, category = _DIFFERENT_CAUSE[name]
    verdict = verdict_of(tmp_path, text)
    assert verdict.failure, (name, verdict)
    assert verdict.category is category, (name, verdict)


@pytest.mark.parametrize("name", sorted(_FAILURES))
def test_these_readings_stay_short_of_a_drain(tmp_path: Path, name: str) -> None:
    """A card's own memory record may warrant a GPU reset, never a node drain on its own; the
    rest are guesses or cascades: restart, never stop."""
    verdict = verdict_of(tmp_path, _FAILURES[name][0])
    if verdict.category is not Category.GPU_HARDWARE:
        assert verdict.confidence < 0.5, (name, verdict)
