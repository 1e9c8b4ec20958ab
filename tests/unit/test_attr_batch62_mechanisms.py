"""Mechanisms read after batch62..batch63's first sight (fault-tolerance and restart tooling,
numerical failures): each a family of messages (other tools' and versions' wordings of the same
failure) with near-misses that must stay apart, never one log's lines (the batches' own logs
are scored by test_attr_realworld's floors). Most are the recovery machinery failing rather
than the job: a process checkpointer, an elastic agent that cannot re-form or reach its
rendezvous, a checkpoint library asking a runtime service that never started."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.unit.log_verdict import family_test, healthy_test, verdict_of

from trainmedic.core.model import Category, Kind

_FAILURES: dict[str, tuple[str, Category, Kind]] = {
    # a process checkpoint-restart tool failing its own assert or its dump/restore
    "dmtcp_jassert_on_reconnect": (
        "[40021] ERROR at connectionrewirer.cpp:112 in doReconnect; REASON='JASSERT(false) "
        "failed'\n"
        "dmtcp_restart (40021): Terminating...\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    "dmtcp_jassert_in_launch": (
        "[3310] ERROR at dmtcp_launch.cpp:402 in main; REASON='JASSERT(pluginPath != NULL) "
        "failed'\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    "criu_restore_failed": (
        "(00.030112) Error (criu/cr-restore.c:1480): 7712 killed by signal 11: Segmentation "
        "fault\n"
        "(00.041120) Error (criu/cr-restore.c:2397): Restoring FAILED.\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    "criu_old_dump_failed": (
        "Error (cr-dump.c:1628): Dumping FAILED.\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    # an elastic agent that keeps failing to renew its own rendezvous heartbeat
    "keepalive_timeout_error": (
        "[2024-03-01 02:00:11,400] torch.distributed.elastic.rendezvous.dynamic_rendezvous: "
        "[WARNING] The node 'trn-a3_9120_0' has failed to send a keep-alive heartbeat to the "
        "rendezvous '8817' due to an error of type RendezvousTimeoutError.\n"
        "[2024-03-01 02:00:16,402] torch.distributed.elastic.rendezvous.dynamic_rendezvous: "
        "[WARNING] The node 'trn-a3_9120_0' has failed to send a keep-alive heartbeat to the "
        "rendezvous '8817' due to an error of type RendezvousTimeoutError.\n",
        Category.SYSTEM_SOFTWARE,
        Kind.HANG,
    ),
    "keepalive_connection_error_plain": (
        "W0412 07:00:01.000 140 dynamic_rendezvous.py:1198] The node 'cn042_77_0' has failed to "
        "send a keep-alive heartbeat to the rendezvous 'job-9' due to an error of type "
        "RendezvousConnectionError.\n",
        Category.SYSTEM_SOFTWARE,
        Kind.HANG,
    ),
    # the agent failing while it re-forms the group after a worker's failure
    "agent_rendezvous_closed_after_restart": (
        "INFO:torch.distributed.elastic.agent.server.api:[default] Worker group FAILED. 1/2 "
        "attempts left; will restart worker group\n"
        "INFO:torch.distributed.elastic.agent.server.api:[default] Stopping worker group\n"
        "INFO:torch.distributed.elastic.agent.server.api:[default] Rendezvous'ing worker group\n"
        "torch.distributed.elastic.rendezvous.api.RendezvousClosedError\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    "agent_traceback_after_restart": (
        "[2024-08-02 11:00:00,101] torch.distributed.elastic.agent.server.api: [INFO] "
        "[default] Worker group FAILED. 2/2 attempts left; will restart worker group\n"
        "[2024-08-02 11:00:00,102] torch.distributed.elastic.agent.server.api: [INFO] "
        "[default] Rendezvous'ing worker group\n"
        "Traceback (most recent call last):\n"
        '  File "/opt/conda/lib/python3.10/site-packages/torch/distributed/run.py", line 810, '
        "in main\n"
        "    run(args)\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    # a checkpoint library asking a preemption-notice service that was never started
    "tsl_sync_manager_not_initialized": (
        "E0601 10:00:00.000000 1234 preemption_sync_manager.cc:210] FAILED_PRECONDITION: "
        "PreemptionSyncManager is not initialized\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    "preemption_notifier_not_started": (
        "RuntimeError: preemption notifier has not been initialized; call "
        "jax.distributed.initialize() with the service enabled\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
}

_HEALTHY: dict[str, str] = {
    # the tools at work: their progress and success lines
    "dmtcp_coordinator_and_restart": (
        "dmtcp_coordinator starting...\n"
        "    Host: cn012 (10.1.0.12)\n"
        "    Port: 7779\n"
        "dmtcp_restart: restarting 4 processes from ckpt_python3_1a2b.dmtcp\n"
    ),
    "criu_success": ("(00.210000) Dumping finished successfully\nRestore finished successfully\n"),
    # heartbeats renewed
    "keepalive_renewed": (
        "[2023-10-20 11:55:36,088] torch.distributed.elastic.rendezvous.dynamic_rendezvous: "
        "[DEBUG] The node 'host-a_9459_0' updated its keep-alive heartbeat time for the "
        "rendezvous 'none'. Pending sync.\n"
    ),
    # a preemption service that started, and a sync point reached
    "preemption_service_up": (
        "I0601 10:00:00.000000 1234 preemption_sync_manager.cc:120] Preemption sync manager "
        "initialized for 16 tasks\n"
    ),
}

test_mechanism_family = family_test(_FAILURES)

test_healthy_counter_case = healthy_test(_HEALTHY)


# Lines that look alike but carry another cause: they must not be read as these mechanisms.
_NOT_THE_MECHANISM: dict[str, str] = {
    # a preemption notice that arrived: the scheduler took the capacity, the service worked
    "preemption_sync_point_reached": (
        "Reached preemption sync point at step 1200, saving a checkpoint\n"
    ),
    # a C assert of the program itself: not the checkpointer's jalib assert
    "program_c_assert": ("train: train.cpp:41: int main(): Assertion `n > 0' failed.\nAborted\n"),
    # the restarts ran out: the workers failed every attempt, torchrun ends with their failure
    "restarts_exhausted": (
        "[default] Worker group FAILED. 1/1 attempts left; will restart worker group\n"
        "[default] Rendezvous'ing worker group\n"
        "[default] Rendezvous complete for workers. Result:\n"
        "[default] Starting worker group\n"
        "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 1) local_rank: 0 "
        "(pid: 812) of binary: /usr/bin/python3\n"
        "Traceback (most recent call last):\n"
        '  File "/usr/local/bin/torchrun", line 8, in <module>\n'
        "    sys.exit(main())\n"
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n"
    ),
    # a worker's own error after the group re-formed: the workers', not the agent's
    "worker_error_after_reform": (
        "[default] Worker group FAILED. 2/3 attempts left; will restart worker group\n"
        "[default] Rendezvous'ing worker group\n"
        "[default] Rendezvous complete for workers. Result:\n"
        "Traceback (most recent call last):\n"
        '  File "/work/train.py", line 88, in <module>\n'
        "    main()\n"
        "KeyError: 'labels'\n"
    ),
}


@pytest.mark.parametrize("name", sorted(_NOT_THE_MECHANISM))
def test_near_misses_are_not_the_mechanism(tmp_path: Path, name: str) -> None:
    verdict = verdict_of(tmp_path, _NOT_THE_MECHANISM[name])
    assert verdict.failure, (name, verdict)
    # Neither the elastic-restart mechanism nor a confident system_software reading: what the
    # learned layer guesses for an unknown (at most 0.3, "learned evidence layer" in the basis)
    # is its own layer's answer and moves with each retrain.
    assert "elastic restart" not in verdict.basis, (name, verdict)
    assert verdict.category is not Category.SYSTEM_SOFTWARE or (
        "learned evidence layer" in verdict.basis and verdict.confidence <= 0.3
    ), (name, verdict)


@pytest.mark.parametrize(
    "line",
    [
        "[40021] WARNING at socketconnection.cpp:211 in preRefill; REASON='JWARNING(false) failed'",
        "(00.001203) Warn  (criu/kerndat.c:866): Can't load /run/criu.kdat",
    ],
)
def test_a_checkpointers_warning_is_not_its_failure(tmp_path: Path, line: str) -> None:
    """The tools' warnings (DMTCP's JWARNING, CRIU's Warn) go on: never their failure entry."""
    verdict = verdict_of(tmp_path, line + "\n")
    assert verdict.root_cause is None or (
        verdict.root_cause.signature != "ckpt.process_checkpoint_tool_failed"
    ), verdict


def test_a_rendezvous_timeout_after_restart_is_not_the_agent(tmp_path: Path) -> None:
    """A re-rendezvous that timed out says a node did not come back, not that the agent broke."""
    verdict = verdict_of(
        tmp_path,
        "[default] Worker group FAILED. 2/3 attempts left; will restart worker group\n"
        "[default] Rendezvous'ing worker group\n"
        "torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError\n",
    )
    assert verdict.failure, verdict
    assert "elastic restart" not in verdict.basis, verdict


def test_the_keepalive_printer_is_not_implicated(tmp_path: Path) -> None:
    """The agent that says it failed to send its heartbeat is alive: never excluded or drained."""
    verdict = verdict_of(tmp_path, _FAILURES["keepalive_timeout_error"][0])
    assert not verdict.implicated.nodes, verdict


@pytest.mark.parametrize(
    "name",
    [
        "dmtcp_jassert_on_reconnect",
        "keepalive_connection_error_plain",
        "agent_traceback_after_restart",
        "preemption_notifier_not_started",
    ],
)
def test_these_readings_stay_guesses(tmp_path: Path, name: str) -> None:
    """A checkpointer's assert can be a lost image, a heartbeat the store's dead host, a
    preemption service one the user could switch on: restart, never stop or drain."""
    verdict = verdict_of(tmp_path, _FAILURES[name][0])
    assert verdict.confidence < 0.5, (name, verdict)
