"""Mechanisms read after batch69-70's first sight (GPU data processing beside training: dask-cuda
workers and their memory pools, Spark listeners; GPU networking on cloud VMs and pods: the
address NCCL picks, the node names it resolves, its start-up lines): each a family of messages
(other tools', versions' and libraries' wordings of the same mechanism) with near-misses that
must stay apart, never one log's lines (the batches' own logs are scored by
test_attr_realworld's floors)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.unit.log_verdict import family_test, healthy_test, lookalike_test, verdict_of

from trainmedic.core.model import Action, Category, Kind
from trainmedic.offline.analyze import analyze_path

_NCCL_START = (
    "gpu-a:990:990 [0] NCCL INFO Bootstrap : Using [0]eth0:10.2.0.4<0>\n"
    "gpu-a:990:990 [0] NCCL INFO NET/Plugin : No plugin found (libnccl-net.so).\n"
    "gpu-a:990:990 [0] misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1]\n"
    "gpu-a:990:990 [0] NCCL INFO NET/Socket : Using [0]eth0:10.2.0.4<0>\n"
    "NCCL version 2.7.8+cuda11.0\n"
)

_FAILURES: dict[str, tuple[str, Category, Kind]] = {
    # a peer connection to a link-local address (169.254/16): never routed off its link, the
    # interface the library picked
    "nccl_connect_link_local_abort": (
        "node-a:88:88 [0] NCCL INFO NET/Socket : Using [0]ens5:10.0.3.9<0> [1]veth-agent:"
        "169.254.3.7<0>\n"
        "node-a:88:91 [0] misc/socket.cc:480 NCCL WARN socketStartConnect: Connect to "
        "169.254.3.7<40211> failed : Software caused connection abort\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    "gloo_connect_link_local_timeout": (
        "RuntimeError: [/opt/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:799] connect "
        "[169.254.12.1]:29311: Connection timed out\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    "mpi_btl_link_local_refused": (
        "[node-b][[1201,1],3][btl_tcp_endpoint.c:796:mca_btl_tcp_endpoint_complete_connect] "
        "connect() to 169.254.0.2 failed: Connection refused (111)\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    # a node name the communication library could not resolve: the cluster's registration of
    # its nodes (a node being replaced), a guess
    "nccl_name_not_known": (
        "gpu-st-p5-4:2210:2251 [0] misc/socket.cc:312 NCCL WARN Net : error encountered when "
        "getting address info : Name or service not known\n",
        Category.SCHEDULER,
        Kind.CRASH,
    ),
    "nccl_name_no_address": (
        "trn1-dy-c1-7:991:1033 [3] misc/socket.cc:121 NCCL WARN Net : error encountered when "
        "getting address info : No address associated with hostname\n",
        Category.SCHEDULER,
        Kind.CRASH,
    ),
    # the GPU out of memory while a worker created its memory pool, before any task: memory
    # another process held
    "rmm_pool_cinit_cuda_oom": (
        "2023-03-01 10:00:01,200 - distributed.worker - ERROR - std::bad_alloc: out_of_memory: "
        "CUDA error at: /opt/conda/include/rmm/mr/device/cuda_memory_resource.hpp:70: "
        "cudaErrorMemoryAllocation out of memory\n"
        "Traceback (most recent call last):\n"
        '  File "/opt/conda/lib/python3.10/site-packages/distributed/worker.py", line 1820, in '
        "plugin_add\n"
        "    result = plugin.setup(worker=self)\n"
        '  File "/opt/conda/lib/python3.10/site-packages/dask_cuda/plugins.py", line 96, in '
        "setup\n"
        "    rmm.reinitialize(\n"
        '  File "rmm/_lib/memory_resource.pyx", line 301, in '
        "rmm._lib.memory_resource.PoolMemoryResource.__cinit__\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    "rmm_arena_reinitialize_memory_error": (
        "Traceback (most recent call last):\n"
        '  File "/srv/env/lib/python3.11/site-packages/rmm/rmm.py", line 92, in reinitialize\n'
        "    mr._initialize(\n"
        '  File "memory_resource.pyx", line 958, in '
        "rmm._lib.memory_resource.ArenaMemoryResource.__cinit__\n"
        "MemoryError: std::bad_alloc: out_of_memory: RMM failure at: arena.hpp:411: "
        "Maximum pool size exceeded\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
}

_HEALTHY: dict[str, str] = {
    # a component named after what it watches for, registered or installed: no event
    "spark_listener_registered": (
        "====== Run query12 ======\nTaskFailureListener is registered.\n"
        "Time taken: [3120] millis for query12\n"
        "====== Run query40 ======\nTaskFailureListener is registered.\n"
        "Time taken: [2210] millis for query40\n"
    ),
    "error_handler_installed": (
        "Registered ErrorHandler for executor pool\nInstalling TimeoutCallback(600s)\n"
        "epoch 1 step 100 loss 2.31\nepoch 1 step 200 loss 2.07\n"
    ),
    # UCX touching its own closed descriptor while it sets up its endpoints
    "ucx_closed_descriptor": (
        "LocalCUDACluster('ucx://127.0.0.1:41007', workers=4, threads=4, memory=503.8 GiB)\n"
        "[1602211093.11] [gpu-3:4410:0]      sock.c:212  UCX  ERROR recv(fd=-1) failed: Bad "
        "file descriptor\n"
        "[1602211093.12] [gpu-3:4410:0]      sock.c:212  UCX  ERROR sendmsg(fd=-1) failed: "
        "Bad file descriptor\n"
    ),
    # an NCCL start cut after each rank set its CPU affinity (before any channel connects)
    "nccl_start_cut_at_affinity": (
        _NCCL_START + "gpu-a:990:1101 [0] NCCL INFO Setting affinity for GPU 0 to 0fffff\n"
        "gpu-a:991:1103 [1] NCCL INFO Setting affinity for GPU 1 to ff,fff00000\n"
    ),
}

test_mechanism_family = family_test(_FAILURES)

test_healthy_counter_case = healthy_test(_HEALTHY)


# Lines that look alike but carry another cause: they must not be read as these mechanisms.
_NOT_THIS: dict[str, tuple[str, Category]] = {
    # a routed address refused: a peer that is not listening (a cascade), not the interface
    "routed_address_refused": (
        "socketPollConnect: connect to 10.1.216.40<58122> returned Connection refused, "
        "retrying (34/34)\n",
        Category.SYSTEM_SOFTWARE,
    ),
    # an outside service's name that does not resolve: the network, not the node registry
    "outside_host_unresolved": (
        "curl_transport.cc:402] Error [6]=Could not resolve host: storage.googleapis.com\n",
        Category.SCHEDULER,
    ),
    # a resolver that did not answer: the node's DNS, not a name the cluster never registered
    "resolver_did_not_answer": (
        "gpu-a:71:90 [0] include/socket.h:235 NCCL WARN Net : error encountered when getting "
        "address info : Temporary failure in name resolution\n",
        Category.SCHEDULER,
    ),
    # a GPU out of memory in a task the worker ran (its pool already made): the job's data
    "oom_in_a_task": (
        "Traceback (most recent call last):\n"
        '  File "/opt/conda/lib/python3.10/site-packages/cudf/core/frame.py", line 410, in '
        "_gather\n"
        "    libcudf.copying.gather(\n"
        "MemoryError: std::bad_alloc: out_of_memory: CUDA error at: /opt/conda/include/rmm/mr/"
        "device/cuda_memory_resource.hpp:70: cudaErrorMemoryAllocation out of memory\n",
        Category.SYSTEM_SOFTWARE,
    ),
}


test_lookalikes_keep_another_reading = lookalike_test(_NOT_THIS)


# The same words saying something did fail stay failures.
_STILL_FAILURES: dict[str, str] = {
    "listener_reports_a_failed_task": (
        "TaskFailureListener: task 12 in stage 3 failed: ExecutorLostFailure (executor 4 exited)\n"
    ),
    "ucx_live_descriptor_reset": (
        "[1602211093.12] [gpu-3:4410:0]      sock.c:212  UCX  ERROR send(fd=37) failed: "
        "Connection reset by peer\n"
    ),
    "nccl_cut_while_channels_connect": (
        _NCCL_START + "gpu-a:990:1101 [0] NCCL INFO Setting affinity for GPU 0 to 0fffff\n"
        "gpu-a:990:1101 [0] NCCL INFO Channel 00/02 :    0   1\n"
        "gpu-a:990:1101 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via P2P/IPC\n"
    ),
}


@pytest.mark.parametrize("name", sorted(_STILL_FAILURES))
def test_failed_forms_stay_failures(tmp_path: Path, name: str) -> None:
    verdict = verdict_of(tmp_path, _STILL_FAILURES[name])
    assert verdict.failure, (name, verdict)


@pytest.mark.parametrize(
    "name",
    [
        "nccl_name_not_known",
        "rmm_pool_cinit_cuda_oom",
        "rmm_arena_reinitialize_memory_error",
    ],
)
def test_these_readings_stay_guesses(tmp_path: Path, name: str) -> None:
    """A node's own broken resolver, a pool asked larger than the GPU read the same: restart,
    never stop or drain on these."""
    path = tmp_path / "job.log"
    path.write_text(_FAILURES[name][0])
    result = analyze_path(path)
    assert result.verdict.failure, (name, result.verdict)
    assert result.verdict.confidence < 0.5, (name, result.verdict)
    assert result.advice.action is Action.RESTART, (name, result.advice)
    assert result.advice.drain_nodes == (), (name, result.advice)
