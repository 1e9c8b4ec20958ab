"""Mechanisms read after batch22..batch25's first sight: each a family of messages (other
tools' and versions' wordings of the same failure) with healthy counter-cases, never one log's
lines (the batches' own logs are scored by test_attr_realworld's floors)."""

from __future__ import annotations

from tests.unit.log_verdict import family_test, healthy_test

from trainmedic.core.model import Category, Kind

_STEPS = "".join(f"step {i} | loss {2.0 - i / 100:.3f}\n" for i in range(1, 6))

_FAILURES: dict[str, tuple[str, Category, Kind]] = {
    # Slurm's SPANK plug-in stack cannot load: every job stops at launch (configuration)
    "spank_conf_unreadable": (
        "srun: error: spank: Failed to open /etc/slurm/plugstack.conf.d/pyxis.conf: "
        "Permission denied\nsrun: error: Plug-in initialization failed\n",
        Category.SCHEDULER,
        Kind.CRASH,
    ),
    "spank_required_plugin_init": (
        "slurmstepd: error: spank: required plugin spank_pyxis.so: init() failed with rc=-1\n"
        "srun: error: task 0 launch failed: Plug-in initialization failed\n",
        Category.SCHEDULER,
        Kind.CRASH,
    ),
    # a batch system holding the job for a policy limit (PBS comment, Moab BLOCK MSG)
    "pbs_per_user_limit": (
        "Job Id: 3091.pbs01\n    job_state = Q\n"
        "    comment = Not Running: Queue workq per-user limit reached on resource ncpus\n",
        Category.SCHEDULER,
        Kind.HANG,
    ),
    "pbs_server_job_limit": (
        "    comment = Not Running: User has reached server running job limit.\n",
        Category.SCHEDULER,
        Kind.HANG,
    ),
    "moab_block_msg": (
        "BLOCK MSG: job 3068570[1] violates idle HARD MAXIJOB limit of 1000 for user u1  "
        "partition ALL (Req: 1  InUse: 1000)\n",
        Category.SCHEDULER,
        Kind.HANG,
    ),
    # the cloud reclaimed spot / low-priority capacity under the job
    "azureml_preemption": (
        _STEPS + "AzureMLCompute job failed. PreemptionError: Nodes of this job got "
        "pre-empted. Check if the run has failed or restarted.\n",
        Category.SCHEDULER,
        Kind.CRASH,
    ),
    "gce_preempted": (
        _STEPS + "ERROR: worker-3: Instance was preempted.\n",
        Category.SCHEDULER,
        Kind.CRASH,
    ),
    "ec2_spot_interruption": (
        _STEPS + "WARNING Spot instance interruption notice received: "
        "instance-action: terminate at 2024-05-01T10:02:00Z\n",
        Category.SCHEDULER,
        Kind.CRASH,
    ),
    # a provisioner whose every launch found no capacity
    "dstack_no_capacity": (
        "job-7 provisioning completed (failed)\nNo capacity\n"
        "Errors: p5.48xlarge in aws/us-west-1: NoCapacityError.\n",
        Category.SCHEDULER,
        Kind.CRASH,
    ),
    "karpenter_unavailable": (
        '{"level":"ERROR","message":"launching nodeclaim, creating instance, insufficient '
        'capacity, all requested instance types were unavailable during launch"}\n',
        Category.SCHEDULER,
        Kind.CRASH,
    ),
    # a launcher lost a node of the application
    "pals_ping_failed": (
        _STEPS + "ping failed on x1000c0s1b0n0: Application 1f2e3d4c-0000-4000-8000-"
        "123456789abc not found\n",
        Category.NODE_HARDWARE,
        Kind.CRASH,
    ),
    # data read back failed its framing or checksum
    "tfrecord_corrupted": (
        "tensorflow.python.framework.errors_impl.DataLossError: corrupted record at "
        "12884901888 [Op:IteratorGetNext]\n",
        Category.STORAGE,
        Kind.CRASH,
    ),
    "hdfs_checksum": (
        "org.apache.hadoop.fs.ChecksumException: Checksum error: /data/part-00012 at 1048576 "
        "exp: 1234 got: 5678\n",
        Category.STORAGE,
        Kind.CRASH,
    ),
    # a dumped kernel stack waiting in a file system's I/O, no hung-task header
    "nfs_stack": (
        "$ cat /proc/4411/stack\n"
        "[<0>] rpc_wait_bit_killable+0x1e/0xa0 [sunrpc]\n"
        "[<0>] __rpc_execute+0xf5/0x4a0 [sunrpc]\n"
        "[<0>] rpc_run_task+0x15a/0x180 [sunrpc]\n"
        "[<0>] nfs4_call_sync_sequence+0x60/0x90 [nfsv4]\n"
        "[<0>] vfs_read+0x93/0x130\n",
        Category.STORAGE,
        Kind.HANG,
    ),
    "fuse_stack": (
        "[<ffffffff8135a3a1>] request_wait_answer+0x101/0x210\n"
        "[<ffffffff8135a567>] fuse_request_send+0x27/0x30\n"
        "[<ffffffff81364901>] fuse_direct_io+0x3e1/0x680\n"
        "[<ffffffff81364c47>] fuse_direct_read_iter+0x47/0x60\n"
        "[<ffffffff812429d9>] __vfs_read+0xe9/0x160\n",
        Category.STORAGE,
        Kind.HANG,
    ),
    # a bare SIGSEGV: the environment (a library / extension built for another version), a guess
    "bare_segfault": ("Segmentation fault (core dumped)\n", Category.SYSTEM_SOFTWARE, Kind.CRASH),
    "torchrun_sigsegv": (
        _STEPS + "[E] failed (exitcode: -11) local_rank: 0 (pid: 4411) of binary: python\n"
        "Signal 11 (SIGSEGV) received by PID 4411\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    # heap corruption / SIGFPE stay the native code's own bug
    "double_free": ("double free or corruption (!prev)\nAborted (core dumped)\n",
                    Category.APPLICATION, Kind.CRASH),
}  # fmt: skip

_HEALTHY: dict[str, str] = {
    # NCCL 2.3-2.6's opening lines: every rank prints them before it connects anyone
    "nccl_2_3_opening": (
        "h1:1406:1490 [0] NCCL INFO NET : Using interface ib0:192.168.1.35<0>\n"
        "h1:1406:1490 [0] NCCL INFO NET/IB : Using interface ib0 for sideband communication\n"
        "h1:1406:1490 [0] NCCL INFO NET/IB: [0] mlx5_0:1/IB\n"
        "h1:1406:1490 [0] NCCL INFO Using internal Network IB\n"
        "h1:1406:1490 [0] NCCL INFO NET/Socket : 1 interfaces found\n"
        "NCCL version 2.4.8+cuda10.1\n"
        "h1:1406:1490 [0] NCCL INFO rank 0 nranks 2\n"
        "h2:2201:2290 [0] NCCL INFO NET : Using interface ib0:192.168.1.36<0>\n"
        "h2:2201:2290 [0] NCCL INFO Using internal Network IB\n"
    ),
    "spank_debug": "slurmd: debug:  spank: opening plugin stack /etc/slurm/plugstack.conf\n",
    "pbs_job_ran": "    comment = Job run at Sat Feb 10 at 08:12 on (x4616c0s4b0n0:ncpus=208)\n",
    # waiting for busy resources is ordinary queueing, not a policy hold
    "pbs_waiting_for_placement": (
        "    comment = Not Running: Placement set is too small: Not enough free nodes available\n"
    ),
    "spot_request_fulfilled": "Spot instance request fulfilled: sir-1234\n" + _STEPS,
    "dstack_running": "job-7 provisioning completed (running)\n" + _STEPS,
    # a stack at rest (a futex, a poll) or one FS frame alone is no hang
    "futex_stack": (
        "[<0>] futex_wait_queue_me+0xc4/0x120\n[<0>] futex_wait+0x10a/0x250\n"
        "[<0>] do_futex+0x10f/0x1e0\n[<0>] __x64_sys_futex+0x13f/0x190\n"
    ),
    "one_fs_frame": (
        "[<0>] ep_poll+0x2aa/0x370\n[<0>] fuse_dev_read+0x5b/0x90\n[<0>] vfs_read+0x93/0x130\n"
    ),
    "tfrecord_written": "INFO: wrote 1024 records to /data/train-00001.tfrecord\n" + _STEPS,
}  # fmt: skip


test_failure_family = family_test(_FAILURES)


test_healthy_counter_case = healthy_test(_HEALTHY)
