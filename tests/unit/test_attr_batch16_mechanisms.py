"""Mechanisms batch16 and batch17 taught, each tested on lines in other shapes (or other tools)
than the batches', and on healthy lines of the same kind, which must stay as they were.

A loss printed as a framework's array object holding NaN has diverged (application). An object
store throttling by its error code (SlowDown without the 503) is storage. A controller or
another scheduler that cannot place a pod or an allocation is the scheduler's. A CSI plugin's
check of a mounted volume timing out is the mount under the pods (storage). CUDA's illegal
state (error 401) is the driver/fabric layer (system_software). A cut traceback inside a remote
file system's read is the remote data source (storage). GPU memory held by a process that is
stopped or a zombie is a leftover of an earlier job the node's cleanup did not kill
(scheduler). A NIC firmware refusing a read-only
query, and NCCL's opening lines up to "Init START", are no failure at all.

Before the change every FAILURES case but ``s3a_error_code_slowdown`` (kept as a guard: its 503
was read already) fell to another category or to none, and ``mlx5_query_refused_old_kernel``
and ``nccl_ranks_entering_init`` in HEALTHY were called failures; the other healthy cases were
healthy before and must stay so.
"""

from __future__ import annotations

from pathlib import Path

from log_verdict import family_test, healthy_test
from log_verdict import verdict_of as _verdict

from trainmedic.core.model import Category, Kind

_STEPS = "".join(f"step {s} loss {2.0 - s / 1000:.3f}\n" for s in range(1, 13))

FAILURES: dict[str, tuple[str, Category, Kind]] = {
    # PyTorch prints the loss as a tensor; here without a device and with a different grad_fn
    "torch_loss_tensor_nan_cpu": (
        "epoch 0 step 10 Loss: tensor(2.3012, grad_fn=<NllLossBackward0>)\n"
        "epoch 0 step 11 Loss: tensor(nan, grad_fn=<NllLossBackward0>)\n",
        Category.APPLICATION,
        Kind.CRASH,
    ),
    "jax_loss_array_nan": (
        "step 200 loss Array(1.9, dtype=float32)\nstep 201 loss Array(nan, dtype=float32)\n",
        Category.APPLICATION,
        Kind.CRASH,
    ),
    "tf_loss_tensor_inf": (
        "Epoch 3: loss = tf.Tensor(inf, shape=(), dtype=float32)\n",
        Category.APPLICATION,
        Kind.CRASH,
    ),
    # Ray Data's wrapping of botocore's error, the code without S3's message after it
    "ray_botocore_slowdown_code_only": (
        "ray.exceptions.RayTaskError(ClientError): ray::write_parquet() (pid=4121, ip=10.0.0.7) "
        "botocore.exceptions.ClientError: An error occurred (SlowDown) when calling the "
        "PutObject operation (reached max retries: 4)\n",
        Category.STORAGE,
        Kind.CRASH,
    ),
    # Hadoop s3a names the code in its own field list (read already; kept as a guard)
    "s3a_error_code_slowdown": (
        "org.apache.hadoop.fs.s3a.AWSS3IOException: completing multipart upload on ckpt/step-4000"
        ": com.amazonaws.services.s3.model.AmazonS3Exception: (Service: Amazon S3; Status Code: "
        "503; Error Code: SlowDown; Request ID: 7AB1)\n",
        Category.STORAGE,
        Kind.CRASH,
    ),
    # a newer scheduler's predicate reason and Nomad's placement failure
    "kube_predicate_not_enough_gpu": (
        "I0301 10:00:00.000000 1 factory.go:648] Unable to schedule default/trainer-0: no fit: "
        "Node didn't have enough resource: nvidia.com/gpu, requested: 1, used: 8, capacity: 8\n",
        Category.SCHEDULER,
        Kind.HANG,
    ),
    "nomad_dimension_exhausted": (
        '==> Evaluation "5b1c0f2e" finished with status "complete" but failed to place all '
        "allocations:\n"
        '    Task Group "train" (failed to place 2 allocations):\n'
        "      * Resources exhausted on 4 nodes\n"
        '      * Dimension "devices: nvidia/gpu" exhausted on 4 nodes\n',
        Category.SCHEDULER,
        Kind.HANG,
    ),
    # another CSI driver's wording (gRPC DeadlineExceeded on the stat of the volume path)
    "csi_stat_deadline_exceeded": (
        "E1003 10:12:01.000000    1 utils.go:81] GRPC error: rpc error: code = DeadlineExceeded "
        "desc = NodeGetVolumeStats: failed to stat volume path "
        "/var/lib/kubelet/pods/p/volumes/kubernetes.io~csi/pv-ckpt/mount: context deadline "
        "exceeded\n",
        Category.STORAGE,
        Kind.HANG,
    ),
    # JAX/XLA's wording of CUDA error 401, and the driver API's enum name
    "xla_cuda_illegal_state": (
        "jaxlib.xla_extension.XlaRuntimeError: INTERNAL: external/xla/xla/stream_executor/cuda/"
        "cuda_driver.cc:1580: CUDA_ERROR_ILLEGAL_STATE: the operation cannot be performed in "
        "the present state\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    # s3fs over aiobotocore/aiohttp, cut inside the transport (a Hub dataset read via gcsfs
    # would print the same shape)
    "s3fs_read_cut_in_transport": (
        "Traceback (most recent call last):\n"
        '  File "/opt/app/train.py", line 88, in <module>\n'
        "    batch = next(it)\n"
        '  File "/usr/lib/python3.11/site-packages/s3fs/core.py", line 2290, in _fetch_range\n'
        "    return await resp['Body'].read()\n"
        '  File "/usr/lib/python3.11/site-packages/aiobotocore/response.py", line 56, in read\n'
        "    chunk = await self.__wrapped__.read(amt)\n"
        '  File "/usr/lib/python3.11/site-packages/aiohttp/streams.py", line 385, in read\n'
        "    await self._wait('read')\n",
        Category.STORAGE,
        Kind.CRASH,
    ),
    # an older driver's table (no GI/CI columns) and ps -o: a zombie still holding memory
    "smi_old_table_zombie_holder": (
        "|  GPU       PID   Type   Process name                             Usage      |\n"
        "|    1     30722      C   /usr/bin/python3                          15870MiB |\n"
        "+-----------------------------------------------------------------------------+\n"
        "  PID STAT     ELAPSED CMD\n"
        "30722 Zl    3-02:11:09 [python3] <defunct>\n",
        Category.SCHEDULER,
        Kind.CRASH,
    ),
    # the CSV query and ps -eo: a process stopped by job control
    "smi_csv_query_stopped_holder": (
        "$ nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader\n"
        "4411, 30120 MiB\n"
        "$ ps -eo pid,stat,etime,cmd | grep 4411\n"
        " 4411 Tl    6-11:40:02 python finetune.py --bs 32\n",
        Category.SCHEDULER,
        Kind.CRASH,
    ),
}

HEALTHY: dict[str, str] = {
    # the job's own process, running, holds the memory it uses
    "smi_table_running_holder": (
        "|    0   N/A  N/A      8812      C   python                          25081MiB |\n"
        "+-----------------------------------------------------------------------------+\n"
        "alice     8812 98.1 14.4 89506440 28604880 pts/2 Rl+ 10:02 47:37 python train.py\n"
    ),
    "torch_loss_tensor_finite": (
        "epoch 0 step 10 Loss: tensor(2.3012, grad_fn=<NllLossBackward0>)\n"
        "epoch 0 step 11 Loss: tensor(2.2871, grad_fn=<NllLossBackward0>)\n"
    ),
    # the same firmware refusal in the older kernels' wording (mlx5_cmd_check, bad parameter)
    # and a QUERY_ command: a health agent's poll, the card works
    "mlx5_query_refused_old_kernel": (
        "[ 8123.441] mlx5_core 0000:3b:00.0: mlx5_cmd_check:794:(pid 5221): ACCESS_REG(0x805) "
        "op_mod(0x1) failed, status bad parameter(0x3), syndrome (0x15c356)\n"
        "[ 8123.512] mlx5_core 0000:3b:00.0: mlx5_cmd_out_err:838:(pid 5221): "
        "QUERY_VPORT_COUNTER(0x770) op_mod(0x0) failed, status bad operation(0x2), syndrome "
        "(0x9a6171), err(-22)\n"
    ),
    # every rank announcing its init (NCCL 2.2x): a start excerpt, not a wait
    "nccl_ranks_entering_init": (
        "gpu-a:410:410 [0] NCCL INFO NCCL version 2.23.4+cuda12.6\n"
        "gpu-a:411:411 [1] NCCL INFO Comm config Blocking set to 1\n"
        "gpu-a:410:455 [0] NCCL INFO ncclCommInitRankConfig comm 0x5a1 rank 0 nranks 8 cudaDev 0 "
        "nvmlDev 0 busId 18000 commId 0x9e1 - Init START\n"
        "gpu-a:411:456 [1] NCCL INFO ncclCommInitRank comm 0x5a2 rank 1 nranks 8 cudaDev 1 "
        "busId 2a000 commId 0x9e1 - Init START\n"
        "gpu-a:412:457 [2] NCCL INFO NET/Plugin: Using internal network plugin.\n"
    ),
    "csi_volume_stats_polled": (
        'I0706 23:21:42.459397 7 utils.go:76] "GRPC call" method="/csi.v1.Node/'
        'NodeGetVolumeStats" volumePath="/var/lib/kubelet/pods/p/volumes/kubernetes.io~csi/pv/'
        'mount"\n'
        'I0706 23:21:42.471000 7 utils.go:82] "GRPC response" method="/csi.v1.Node/'
        'NodeGetVolumeStats" timeout="30s"\n'
    ),
    "nomad_allocation_placed": (
        '==> Evaluation "5b1c0f2e" finished with status "complete"\n'
        '    Task Group "train" (placed 2 allocations)\n' + _STEPS
    ),
    "fsspec_http_reads_then_training": (
        "fsspec: opened https://data.example.org/shards/train-00001.tar (range 0-1048576)\n"
        + _STEPS
    ),
}


test_mechanism_names_its_category = family_test(FAILURES)


test_healthy_lines_stay_healthy = healthy_test(HEALTHY)


def test_a_cut_remote_read_stays_a_guess(tmp_path: Path) -> None:
    verdict = _verdict(tmp_path, FAILURES["s3fs_read_cut_in_transport"][0])
    assert verdict.confidence < 0.5, verdict
