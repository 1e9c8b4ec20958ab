"""Mechanisms read after batch53's first sight (RL post-training pipelines: a trainer framework
driving inference engines, both placed by Ray): each a family of messages (other frameworks',
engines' and versions' wordings of the same failure) with healthy or differently-caused
counter-cases, never one log's lines (the batch's own logs are scored by test_attr_realworld's
floors). The user of such a pipeline writes a config and a reward; the calls between trainer
and engine, the workers' placement and their collectives are the framework's."""

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
    # a trainer's call into a running inference engine failing inside the engine
    "vllm_wake_up_invocation_failed": (
        "(vLLMHttpServer pid=9912) (EngineCore_DP1 pid=10233) ERROR 11-02 14:10:03 "
        "[core.py:1250] Invocation of wake_up method failed\n"
        "(vLLMHttpServer pid=9912) (EngineCore_DP1 pid=10233) ERROR 11-02 14:10:03 "
        "[core.py:1250] Traceback (most recent call last):\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    "sglang_online_weight_update_failed": (
        "[2025-04-01 10:22:13 TP3] Failed to update parameter online: Connection closed by "
        "peer [10.1.2.3]:29511. The full weights of the ModelRunner are partially updated. "
        "Please discard the whole weights.\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    "sglang_weight_sync_group_failed": (
        "[2025-02-11 08:01:55 TP0] Failed to initialize custom process group: The client "
        "socket has timed out after 900000ms while trying to connect to (10.0.0.5, 41000).\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    # a framework's check that the Ray cluster holds the GPUs its config requests
    "verl_resource_pool_short": (
        '  File "/opt/verl/verl/trainer/ppo/ray_trainer.py", line 120, in '
        "_check_resource_available\n"
        "    raise ValueError(\n"
        "ValueError: Total available GPUs 4 is less than total desired GPUs 8\n",
        Category.SCHEDULER,
        Kind.CRASH,
    ),
    "nemo_rl_virtual_cluster_short": (
        "ValueError: Not enough GPUs available. Requested 32 GPUs, but only 24 are available "
        "in the cluster.\n",
        Category.SCHEDULER,
        Kind.CRASH,
    ),
    "vllm_placement_group_short": (
        "ValueError: The number of required GPUs exceeds the total number of available GPUs in "
        "the placement group.\n",
        Category.SCHEDULER,
        Kind.CRASH,
    ),
    # two ranks on one GPU inside Ray actors: the placement, not the user's script
    "duplicate_gpu_in_ray_train_workers": (
        "(RayTrainWorker pid=51220, ip=10.8.0.12) node12:51220:51301 [0] init.cc:871 NCCL WARN "
        "Duplicate GPU detected : rank 3 and rank 2 both on CUDA device 3b000\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    "duplicate_gpu_in_openrlhf_actors": (
        "(PolicyModelActor pid=7781) [2025-01-09 11:02:40] h100-07:7781:7840 [2] init.cc:904 "
        "NCCL WARN Duplicate GPU detected : rank 6 and rank 2 both on CUDA device 86000\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    # a constructor refusing a recipe's keyword inside a library's instantiation
    "hydra_instantiate_unexpected_keyword": (
        "Traceback (most recent call last):\n"
        '  File "/usr/local/lib/python3.10/site-packages/hydra/_internal/instantiate/'
        '_instantiate2.py", line 92, in _call_target\n'
        "    return _target_(*args, **kwargs)\n"
        "TypeError: FusedAdam.__init__() got an unexpected keyword argument 'adam_w_mode'\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    "bridge_instantiate_unexpected_keyword": (
        "(DTensorPolicyWorker pid=4410) Traceback (most recent call last):\n"
        '(DTensorPolicyWorker pid=4410)   File "/opt/Megatron-Bridge/src/megatron/bridge/utils/'
        'instantiate_utils.py", line 206, in instantiate_node\n'
        "(DTensorPolicyWorker pid=4410) TypeError: Qwen3ModelProvider.__init__() got an "
        "unexpected keyword argument 'moe_router_load_balancing'\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    # collective timeouts and nothing else, all in an RL framework's workers
    "openrlhf_actor_watchdog": (
        "(PolicyModelActor pid=20117, ip=10.4.0.2) [rank3]:[E1102 08:14:51.201 "
        "ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=12, OpType=BROADCAST, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) "
        "ran for 1800091 milliseconds before timing out.\n",
        Category.SYSTEM_SOFTWARE,
        Kind.HANG,
    ),
    "nemo_rl_policy_worker_watchdog": (
        "(DTensorPolicyWorker pid=88120) [rank0]:[E0611 21:40:02.551 ProcessGroupNCCL.cpp:632] "
        "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=2411, "
        "OpType=ALLGATHER, NumelIn=4096, NumelOut=32768, Timeout(ms)=600000) ran for 600410 "
        "milliseconds before timing out.\n",
        Category.SYSTEM_SOFTWARE,
        Kind.HANG,
    ),
}

_HEALTHY: dict[str, str] = {
    "vllm_sleep_and_wake_in_a_trainer": (
        "(LLMRayActor pid=3120) INFO 03-05 00:25:40 [gpu_worker.py:104] Sleep mode freed 61.3 "
        "GiB memory, 3.2 GiB memory is still in use.\n"
        "(LLMRayActor pid=3120) INFO 03-05 00:26:02 [executor_base.py:210] It took 1.9 "
        "seconds to wake up tags ['weights'].\n"
    ),
    "ray_cluster_with_enough_gpus": (
        "Ray cluster resources: {'GPU': 16.0, 'CPU': 224.0}\n"
        "(TaskRunner pid=1201) step:1 - actor/pg_loss:0.012 - critic/score/mean:0.41\n"
    ),
    "rl_worker_nccl_setup": (
        "(WorkerDict pid=5512) gpu-1:5512:5600 [0] NCCL INFO comm 0x55d1 rank 0 nranks 8 "
        "cudaDev 0 nvmlDev 0 busId 18000 commId 0x91ab - Init COMPLETE\n"
        "(TaskRunner pid=5301) step:1 - actor/pg_loss:0.031 - timing_s/update_weights:4.2\n"
        "(TaskRunner pid=5301) step:2 - actor/pg_loss:0.027 - timing_s/update_weights:4.1\n"
    ),
}

# The same lines with the user's own code as their cause: these keep their verdict.
_DIFFERENT_CAUSE: dict[str, tuple[str, Category]] = {
    "duplicate_gpu_under_torchrun": (
        "[rank1]: node3:4411:4411 [1] init.cc:871 NCCL WARN Duplicate GPU detected : rank 1 and "
        "rank 0 both on CUDA device 1a000\n",
        Category.APPLICATION,
    ),
    "unexpected_keyword_in_the_users_script": (
        "Traceback (most recent call last):\n"
        '  File "/home/u/rlhf/train_ppo.py", line 88, in <module>\n'
        "    model = build_model(cfg, dropout_rate=0.1)\n"
        "TypeError: build_model() got an unexpected keyword argument 'dropout_rate'\n",
        Category.APPLICATION,
    ),
    "gpu_request_rejected_for_the_model": (
        "ValueError: Requested 16 GPUs for tensor parallel but the model has 12 attention "
        "heads, which is not divisible by 16.\n",
        Category.APPLICATION,
    ),
    "engine_call_failing_on_memory": (
        "ERROR 11-02 14:10:03 [core.py:1250] Invocation of wake_up method failed\n"
        "ERROR 11-02 14:10:03 [core.py:1250] Traceback (most recent call last):\n"
        "ERROR 11-02 14:10:03 [core.py:1250] torch.OutOfMemoryError: CUDA out of memory. Tried "
        "to allocate 2.00 GiB. GPU 0 has a total capacity of 79.11 GiB of which 1.02 GiB is "
        "free.\n",
        Category.APPLICATION,
    ),
    "watchdog_under_plain_torchrun": (
        "[rank2]:[E1102 08:14:51.201 ProcessGroupNCCL.cpp:616] [Rank 2] Watchdog caught "
        "collective operation timeout: WorkNCCL(SeqNum=5211, OpType=ALLREDUCE, NumelIn=1, "
        "NumelOut=1, Timeout(ms)=600000) ran for 600091 milliseconds before timing out.\n",
        Category.APPLICATION,
    ),
}


test_mechanism_family = family_test(_FAILURES)


test_healthy_counter_case = healthy_test(_HEALTHY)


@pytest.mark.parametrize("name", sorted(_DIFFERENT_CAUSE))
def test_the_users_own_causes_stay_its(tmp_path: Path, name: str) -> None:
    text, category = _DIFFERENT_CAUSE[name]
    verdict = verdict_of(tmp_path, text)
    assert verdict.failure, (name, verdict)
    assert verdict.category is category, (name, verdict)


@pytest.mark.parametrize("name", sorted(_FAILURES))
def test_these_readings_stay_guesses(tmp_path: Path, name: str) -> None:
    """A framework's seam, its placement or its recipe is the usual cause, not the only one
    (a user's reward or config can stall or mistype too): the policy restarts, never stops or
    drains on these."""
    verdict = verdict_of(tmp_path, _FAILURES[name][0])
    assert verdict.confidence < 0.5, (name, verdict)
