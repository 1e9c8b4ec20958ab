"""Mechanisms read after batch32's first sight: each a family of messages (other tools' and
versions' wordings of the same failure) with healthy counter-cases, never one log's lines (the
batch's own logs are scored by test_attr_realworld's floors)."""

from __future__ import annotations

from tests.unit.log_verdict import family_test, healthy_test

from trainmedic.core.model import Category, Kind

_FAILURES: dict[str, tuple[str, Category, Kind]] = {
    # a health check's memory UNDER its minimum is a part the node lost: still a failure
    "nhc_ram_below_minimum": (
        "ERROR:  nhc:  Health check failed:  check_hw_physmem:  Actual RAM size (250000000 kB) "
        "less than minimum allowed (500000000 kB).\n",
        Category.NODE_HARDWARE,
        Kind.CRASH,
    ),
    # the kernel has no driver for the file-system type: the node's software, not the storage
    "lustre_enodev": (
        "mount.lustre: mount 10.1.0.4@o2ib:/scratch at /scratch failed: No such device\n"
        "Are the lustre modules loaded?\n"
        "Check /etc/modprobe.conf and /proc/filesystems\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    "nfs_enodev": ("mount.nfs: No such device\n", Category.SYSTEM_SOFTWARE, Kind.CRASH),
    "cifs_not_supported": (
        "mount error: cifs filesystem not supported by the system\n"
        "mount error(19): No such device\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    "fuse_module_absent": (
        "fuse: device not found, try 'modprobe fuse' first\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    "modprobe_for_this_kernel": (
        "modprobe: FATAL: Module lustre not found in directory /lib/modules/5.15.0-1051-aws\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    # ... while a mount the kernel knows that then cannot reach or read its server is storage
    "lustre_mount_eio": (
        "mount.lustre: mount 10.1.0.4@o2ib:/scratch at /scratch failed: Input/output error\n",
        Category.STORAGE,
        Kind.CRASH,
    ),
    # systemd's report that a storage client's unit did not start: the host's software (the
    # client's kernel module build, its packages), whichever file system the unit serves
    "systemd_job_failed": (
        "Job for beegfs-client.service failed because the control process exited with error "
        'code. See "systemctl status beegfs-client.service" and "journalctl -xe" for details.\n',
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    "systemd_unit_entered_failed": (
        "Mar 02 10:00:01 node7 systemd[1]: Unit lustre-client.service entered failed state.\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    "systemd_dependency_failed": (
        "A dependency job for remote-fs.target failed. See 'journalctl -xe' for details.\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    # a memory tester reading back other bits than it wrote: the node's RAM
    "memtester_miscompare": (
        "Loop 1/1:\n"
        "  Stuck Address       : ok\n"
        "  Random Value        : FAILURE: 0x5a5a5a5a5a5a5a5a != 0x5a5a5a5b5a5a5a5a at offset "
        "0x04f2a110.\n"
        "  Compare XOR         : ok\n",
        Category.NODE_HARDWARE,
        Kind.CRASH,
    ),
    "stressapptest_miscompare": (
        "Log: Starting worker threads\n"
        "Report Error: miscompare on CPU 5(0x20) at 0x7f10a2c04400(0x0:DIMM Unknown): "
        "read:0x7fffffffffffffff, reread:0x7fffffffffffffff expected:0xffffffffffffffff\n"
        "Stats: Completed: 1203040.00M in 60.02s 20044.00MB/s, "
        "with 1 hardware incidents, 0 errors\n"
        "Status: FAIL - test discovered HW problems\n",
        Category.NODE_HARDWARE,
        Kind.CRASH,
    ),
    "kernel_early_memtest": (
        "[    0.000000] early_memtest: # of tests: 4\n"
        "[    0.000000]   0x0000000123456000 bad mem addr 0x0000000123456000 - "
        "0x0000000123457000 reserved\n",
        Category.NODE_HARDWARE,
        Kind.CRASH,
    ),
    # a FUSE storage client's daemon failing an operation: the mount, even when its own
    # memory is the reason it gives (not the job's memory)
    "blobfuse_bad_alloc": (
        "blobfuse[2144]: Unknown failure in list_blobs_hierarchial.  ex.what() = std::bad_alloc, "
        "container = ckpt, prefix = run3/.\n",
        Category.STORAGE,
        Kind.CRASH,
    ),
    "blobfuse2_download_failed": (
        "blobfuse2[2201]: LOG_ERR [block_blob.go (612)]: BlockBlob::ReadBuffer : Failed to "
        "download blob shards/0007.tar [context deadline exceeded]\n",
        Category.STORAGE,
        Kind.CRASH,
    ),
    "gcsfuse_read_failed": (
        "gcsfuse[981]: ReadFile: input/output error, fh.reader.ReadAt: readFull: error reading "
        "object\n",
        Category.STORAGE,
        Kind.CRASH,
    ),
    # ... while the job's own std::bad_alloc stays the job's memory
    "job_bad_alloc": (
        "terminate called after throwing an instance of 'std::bad_alloc'\n"
        "  what():  std::bad_alloc\n",
        Category.APPLICATION,
        Kind.CRASH,
    ),
    # a kernel call trace through a driver module's probe: the driver tripped binding to its
    # device at load (built for another kernel, RDMA stack or firmware), a guess
    "nvidia_probe_warn": (
        "[  112.500100] ------------[ cut here ]------------\n"
        "[  112.500233] WARNING: CPU: 7 PID: 1123 at kernel/dma/mapping.c:532 "
        "dma_alloc_attrs+0x9c/0xb0\n"
        "[  112.501001] Call Trace:\n"
        "[  112.501120]  <TASK>\n"
        "[  112.501200]  nv_alloc_contig_pages+0x1c1/0x2b0 [nvidia]\n"
        "[  112.501233]  nv_pci_probe+0x6f2/0x1a50 [nvidia]\n"
        "[  112.501300]  local_pci_probe+0x42/0x80\n"
        "[  112.501310]  </TASK>\n"
        "[  112.501400] ---[ end trace 5d1e2f0b9c7a1e22 ]---\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    "mlx5_init_trace": (
        "[   20.111000] RSP: 0018:ffffb217afff3d70 EFLAGS: 00010206\n"
        "[   20.111010] Call Trace:\n"
        "[   20.111020]  mlx5_function_setup+0x2a0/0x4c0 [mlx5_core]\n"
        "[   20.111030]  mlx5_init_one+0x1c4/0x5e0 [mlx5_core]\n"
        "[   20.111040]  probe_one+0x2d2/0x450 [mlx5_core]\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    # a partition without any node: jobs for it pend until nodes join (a guess, 0.45)
    "sinfo_empty_partition": (
        "$ squeue\n"
        "             JOBID PARTITION     NAME     USER ST       TIME  NODES NODELIST(REASON)\n"
        "                41       gpu    train    alice PD       0:00      2 (Resources)\n"
        "$ sinfo\n"
        "PARTITION AVAIL  TIMELIMIT  NODES  STATE NODELIST\n"
        "gpu*         up 2-00:00:00      0    n/a\n",
        Category.SCHEDULER,
        Kind.HANG,
    ),
    "sinfo_summary_empty": (
        "PARTITION AVAIL  TIMELIMIT   NODES(A/I/O/T) NODELIST\n"
        "hpc*         up   infinite          0/0/0/0\n",
        Category.SCHEDULER,
        Kind.HANG,
    ),
}

_HEALTHY: dict[str, str] = {
    # a health check's memory ABOVE its maximum: the bound was written for another node type
    "nhc_ram_above_maximum": (
        "ERROR:  nhc:  Health check failed:  check_hw_physmem:  Actual RAM size (1048576000 kB) "
        "greater than maximum allowed (524288000 kB).\n"
    ),
    "nhc_swap_above_maximum": (
        "ERROR:  nhc:  Health check failed:  check_hw_swap:  Actual SWAP size (8388604 kB) "
        "greater than maximum allowed (0 kB).\n"
    ),
    "nhc_system_memory_above_maximum": (
        "ERROR:  nhc:  Health check failed:  check_hw_mem:  "
        "Actual system memory (2113929216 kB) greater than maximum allowed (1056964608 kB).\n"
    ),
    "systemd_started_storage_client": (
        "Mar 02 10:00:01 node7 systemd[1]: Starting BeeGFS Client...\n"
        "Mar 02 10:00:04 node7 systemd[1]: Started BeeGFS Client.\n"
    ),
    "memtester_clean": (
        "Loop 1/1:\n  Stuck Address       : ok\n  Random Value        : ok\n"
        "  Compare XOR         : ok\nDone.\n"
    ),
    "stressapptest_pass": (
        "Stats: Completed: 1203040.00M in 60.02s 20044.00MB/s, "
        "with 0 hardware incidents, 0 errors\n"
        "Status: PASS - please verify no corrected errors\n"
    ),
    "fuse_clients_mounting": (
        "blobfuse2[2201]: LOG_INFO [mount.go (432)]: mount: Mounting blobfuse2 on /mnt/blob\n"
        "s3fs[7412]: s3fs.cpp:s3fs_init(3493): init v1.86(commit:unknown) with OpenSSL\n"
        "gcsfuse[981]: File system has been successfully mounted.\n"
    ),
    "driver_bound_cleanly": (
        "[   12.925245] mlx5_core 0000:03:00.0: enabling device (0000 -> 0002)\n"
        "[   12.925600] mlx5_core 0000:03:00.0: firmware version: 28.39.1002\n"
        "[   13.400110] efa 0000:4f:00.0: Setup irq:1861 name:efa-mgmnt@pci:0000:4f:00.0\n"
    ),
    "sinfo_cloud_nodes_powered_down": (
        "PARTITION AVAIL  TIMELIMIT  NODES  STATE NODELIST\n"
        "gpu*         up   infinite      4  idle~ gpu-dy-p4d-[1-4]\n"
        "cpu          up   infinite      2  alloc cpu-st-c5-[1-2]\n"
        "             JOBID PARTITION     NAME     USER ST       TIME  NODES NODELIST(REASON)\n"
        "                41       gpu    train    alice PD       0:00      2 (Resources)\n"
    ),
}


test_failure_families = family_test(_FAILURES)


test_healthy_counter_cases = healthy_test(_HEALTHY)
