"""Mechanisms the catalogue knew in one vendor's or tool's words, read in the others' (the
classes of batch01-07's misses, probed with lines of stacks no batch showed yet), with healthy
counter-cases that must stay "no failure".

* an accelerator's uncorrectable memory error from ROCm/HIP and Gaudi (HBM "DERR"), a failed
  device diagnostic (DCGM's diag table, vendor qualification tools): the device;
* XLA's TPU out-of-memory wording ("ran out of memory in memory space hbm"): the job's memory,
  not the device's HBM failing;
* Lustre's network layer (LNet), BeeGFS's client, GPFS's disk lease expelling a node, the AWS
  transfer manager giving up: storage;
* an accelerator driver that cannot load its firmware, MPI that fails in ``MPI_Init``, the
  container runtime (an image it cannot pull, a pod sandbox or CNI network it cannot set up,
  the device plug-in's allocation): the software stack;
* a library's environment setting naming what is not there (NCCL_IB_HCA, UCX_NET_DEVICES),
  a driver/library symbol mismatch under NCCL, ROCm finding no device, the linker missing a
  system library: the software stack; an allocation revoked: the scheduler;
* the accelerator runtimes' own set-up failures (Gaudi's device acquire, ROCm's HSA status
  errors other than memory faults, the TPU runtime's initialisation): the software stack; a
  device the vendor tool reports not operational: the device; a bond's link "definitely
  down" under a socket reset: the fabric;
* Lustre's ESHUTDOWN (errno 108): storage; a Neuron core's uncorrectable HBM error: the device;
  a step asking for memory its allocation lacks: the scheduler;
* a PBS job deleted by an administrator, Flux's allocation expiring, a maximum run duration
  exceeded, a cloud plug-in's node that never came up: the scheduler;
* a node taken out of service: the reason its drainer wrote names the part (a GPU's Xid, a
  DIMM), and sinfo's "Not responding" row is the node; port counters written inline
  ("SymbolErrors=44211") are the fabric's (``errors=`` is an option only after a non-letter).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from log_verdict import verdict_of as _verdict

from trainmedic.core.model import Category

FAILURES: dict[str, tuple[str, Category]] = {
    "hip_ecc": ("RuntimeError: HIP error: hipErrorECCNotCorrectable\n", Category.GPU_HARDWARE),
    "gaudi_hbm_derr": (
        "habanalabs hl3: Received H/W interrupt 296, HBM1 ECC DERR, reset is required\n",
        Category.GPU_HARDWARE,
    ),
    "diagnostic_tool_failed": (
        "rvs: gst test failed on device 3\nhl_qual: memory test FAILED on device hl2\n",
        Category.GPU_HARDWARE,
    ),
    "tpu_hbm_oom": (
        "RESOURCE_EXHAUSTED: TPU ran out of memory in memory space hbm. Used 17.5G of 15.48G "
        "hbm.\n",
        Category.APPLICATION,
    ),
    "lnet_timeout": (
        "LNetError: 4412:0:(o2iblnd_cb.c:3358:kiblnd_check_txs_locked()) Timed out tx: "
        "active_txs, 0 seconds\n",
        Category.STORAGE,
    ),
    "beegfs_client": (
        "beegfs_client: Communication error on node storage02: Connection timed out\n",
        Category.STORAGE,
    ),
    "gpfs_lease_expelled": (
        "mmfs: [E] The disk lease for file system gpfs01 expired; node will be expelled\n",
        Category.STORAGE,
    ),
    "s3transfer_retries": (
        "s3transfer.exceptions.RetriesExceededError: Max Retries Exceeded\n",
        Category.STORAGE,
    ),
    "accelerator_firmware": (
        "habanalabs hl0: Failed to load firmware file habanalabs/gaudi2/gaudi2-boot-fit.itb\n",
        Category.SYSTEM_SOFTWARE,
    ),
    "mpi_init_failed": (
        "[gpu-1:1234] *** An error occurred in MPI_Init_thread\n"
        "[gpu-1:1234] *** on a NULL communicator\n",
        Category.SYSTEM_SOFTWARE,
    ),
    "pbs_admin_delete": (
        "Job 4412.pbs01 deleted by root@pbs01 (admin request)\n",
        Category.SCHEDULER,
    ),
    "flux_allocation_expired": (
        "flux-job: task(s) exited with exit code 143\n"
        "job.exception type=timeout severity=0 resource allocation expired\n",
        Category.SCHEDULER,
    ),
    "max_run_duration": (
        "The job was terminated because its maximum duration (max_run_duration) of 24h was "
        "exceeded\n",
        Category.SCHEDULER,
    ),
    # the scheduler's record of a node taken out of service: its reason names the part
    "drain_reason_names_gpu": (
        "NodeName=gpu-07 Arch=x86_64 State=DRAIN Reason=GPU 3 Xid 79 [root@2024-02-11T10:00]\n",
        Category.GPU_HARDWARE,
    ),
    "drain_reason_names_dimm": (
        "NodeName=cn-12 State=IDLE+DRAIN Reason=DIMM B2 uncorrectable [admin@2024-02-11T10:00]\n",
        Category.NODE_HARDWARE,
    ),
    "sinfo_not_responding": (
        "REASON               USER      TIMESTAMP           NODELIST\n"
        "Not responding       slurm     2024-02-11T10:00:00 gpu-07\n",
        Category.NODE_HARDWARE,
    ),
    "cloud_node_never_provisioned": (
        "REASON               USER      TIMESTAMP           NODELIST\n"
        "pcluster_node_fail   root      2024-02-11T10:00:00 gpu-dy-p5-1\n",
        Category.SCHEDULER,
    ),
    "image_pull_failed": (
        "  Warning  Failed     3s    kubelet  Error: ErrImagePull\n"
        "  Warning  Failed     3s    kubelet  Error: ImagePullBackOff\n",
        Category.SYSTEM_SOFTWARE,
    ),
    "pod_sandbox_network": (
        "  Warning  FailedCreatePodSandBox  1m  kubelet  Failed to create pod sandbox: rpc error: "
        'code = Unknown desc = failed to setup network for sandbox "abc": plugin type="multus" '
        "failed (add)\n",
        Category.SYSTEM_SOFTWARE,
    ),
    # fewer devices free at admission than the scheduler counted: its accounting was stale
    # (r34010, kubernetes#130145, HAMi#596: scheduler), not the plug-in (its RPC failing is)
    "device_plugin_admission": (
        "  Warning  UnexpectedAdmissionError  30s  kubelet  Allocate failed due to requested "
        "number of devices unavailable for nvidia.com/gpu. Requested: 8, Available: 7\n",
        Category.SCHEDULER,
    ),
    "step_memory_not_available": (
        "srun: error: Unable to create step for job 4412: Memory required by task is not "
        "available\n",
        Category.SCHEDULER,
    ),
    "lustre_eshutdown": (
        "OSError: [Errno 108] Cannot send after transport endpoint shutdown\n",
        Category.STORAGE,
    ),
    "neuron_hbm_uncorrectable": (
        "Accelerator 3: NeuronCore 2 hit an unrecoverable hardware error "
        "(NRT_EXEC_HW_ERR_HBM_UE)\n",
        Category.GPU_HARDWARE,
    ),
    "gaudi_device_acquire": (
        "RuntimeError: synStatus=26 [Generic failure] Device acquire failed.\n",
        Category.SYSTEM_SOFTWARE,
    ),
    "hsa_runtime_resources": (
        "rocm: HSA_STATUS_ERROR_OUT_OF_RESOURCES: The runtime failed to allocate the necessary "
        "resources. Code: 0x1008\n",
        Category.SYSTEM_SOFTWARE,
    ),
    "tpu_runtime_init": (
        "jax.errors.JaxRuntimeError: UNAVAILABLE: TPU backend initialization is taking too long\n"
        "Failed to get TPU metadata (tpu-env) from instance metadata\n",
        Category.SYSTEM_SOFTWARE,
    ),
    "accelerator_not_operational": (
        "hl-smi: Device 0000:33:00.0 (hl3) Status: Critical - device is not operational\n",
        Category.GPU_HARDWARE,
    ),
    "bonding_link_down_under_socket_reset": (
        "[gpu-1:0] NCCL WARN NET/Socket : recv: Connection reset by peer\n"
        "kernel: bond0: link status definitely down for interface eth2, disabling it\n",
        Category.NETWORK_HARDWARE,
    ),
    "library_setting_names_missing_hca": (
        "gpu-2:881:950 [0] NCCL WARN NCCL_IB_HCA set to mlx5_9 but no such device was found\n",
        Category.SYSTEM_SOFTWARE,
    ),
    "cuda_named_symbol_under_nccl": (
        "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1272, unhandled cuda error, NCCL "
        "version 2.10.3\nncclUnhandledCudaError: Call to CUDA function failed.\nLast error:\n"
        "Cuda failure 'named symbol not found'\n",
        Category.SYSTEM_SOFTWARE,
    ),
    "hip_no_device": (
        "ROCm: HIP error: hipErrorNoDevice\n"
        "rocminfo: HSA Error: hsa api call failure at: rocminfo.cc:1143\n",
        Category.SYSTEM_SOFTWARE,
    ),
    "linker_missing_library": (
        "/usr/bin/ld: cannot find -lcuda: No such file or directory\n"
        "collect2: error: ld returned 1 exit status\n",
        Category.SYSTEM_SOFTWARE,
    ),
    "allocation_revoked": ("salloc: Job allocation 881 has been revoked.\n", Category.SCHEDULER),
    "ib_counters_inline": (
        "Port 17: PhysLinkState=LinkUp LinkDowned=2831 SymbolErrors=44211\n",
        Category.NETWORK_HARDWARE,
    ),
}


@pytest.mark.parametrize("name", sorted(FAILURES))
def test_failure_in_another_vendors_words(tmp_path: Path, name: str) -> None:
    text, category = FAILURES[name]
    verdict = _verdict(tmp_path, text)
    assert verdict.failure, name
    assert verdict.category is category, (name, verdict.category, verdict.basis)


HEALTHY: dict[str, str] = {
    "kubectl_cleanup_after_training": (
        "".join(f"step {i} loss {2.0 - i / 100:.3f}\n" for i in range(25))
        + 'job.batch "train" deleted\npytorchjob.kubeflow.org "bert" deleted\n'
    ),
    "hbm_corrected": "habanalabs hl3: HBM1 ECC SERR corrected, count 1\n",
    "dcgm_diag_pass": (
        "| Memory                    | Pass - All                                     |\n"
        "| Diagnostic                | Pass - All                                     |\n"
    ),
    "firmware_loaded": "habanalabs hl0: Successfully loaded firmware to device\n",
    "gpfs_lease_renewed": "mmfs: [I] Disk lease for file system gpfs01 renewed\n",
    "nodes_in_service": (
        "NodeName=gpu-07 Arch=x86_64 State=ALLOCATED Reason=(null)\n"
        "JobId=4412 JobState=RUNNING Reason=None\n"
    ),
    "image_pulled": (
        "  Normal  Pulled  2m  kubelet  Successfully pulled image "
        '"nvcr.io/nvidia/pytorch:24.01-py3" in 2m3s\n'
    ),
    "decode_option": "reading shards with errors=replace, encoding=utf-8\n",
}


@pytest.mark.parametrize("name", sorted(HEALTHY))
def test_healthy_counter_case(tmp_path: Path, name: str) -> None:
    verdict = _verdict(tmp_path, HEALTHY[name])
    assert not verdict.failure, (name, verdict.category, verdict.basis)
