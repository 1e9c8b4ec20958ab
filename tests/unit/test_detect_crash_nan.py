"""Crash from scheduler state or a fatal line; NaN from loss or a signature line."""

from __future__ import annotations

import math

import pytest

from trainmedic.core.detect import JobDetectorState, Trigger, crash_from_status, is_nan_event
from trainmedic.core.model import ActionHint, Category, Event, EvidenceSource, Kind, Role
from trainmedic.core.observations import JobStatus, Progress
from trainmedic.core.states import JobState

JOB = "j1"


def status(state: JobState, t: float = 1.0) -> JobStatus:
    return JobStatus(time=t, job_id=JOB, state=state, nodes=("n1",), exit_code=1)


@pytest.mark.parametrize(
    "state",
    [
        JobState.FAILED,
        JobState.NODE_FAIL,
        JobState.OUT_OF_MEMORY,
        JobState.TIMEOUT,
        JobState.PREEMPTED,
    ],
)
def test_failed_states_are_crashes(state: JobState) -> None:
    anomaly = crash_from_status(status(state), now=2.0)
    assert anomaly is not None and anomaly.kind is Kind.CRASH
    assert anomaly.trigger is Trigger.JOB_STATE and state.value in anomaly.basis
    assert anomaly.since == 1.0 and anomaly.latency == 1.0


@pytest.mark.parametrize("state", [JobState.COMPLETED, JobState.CANCELLED, JobState.RUNNING])
def test_completed_is_not_a_crash(state: JobState) -> None:
    assert crash_from_status(status(state), now=2.0) is None


def xid79(role: Role = Role.PRIMARY, hint: ActionHint = ActionHint.REBOOT_NODE) -> Event:
    return Event(
        signature="kernel.xid.79",
        category=Category.GPU_HARDWARE,
        kind=Kind.CRASH,
        role=role,
        line=3,
        text="NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.",
        evidence=EvidenceSource.KERNEL_LOG,
        node="n2",
        xid=79,
        action_hint=hint,
        strong=True,
    )


def test_fatal_event_while_running_is_a_crash_once() -> None:
    state = JobDetectorState(JOB)
    state.observe(JobStatus(time=0.0, job_id=JOB, state=JobState.RUNNING, nodes=("n1", "n2")))
    state.observe_event(xid79(), now=5.0)
    (crash,) = state.check(5.0)
    assert crash.trigger is Trigger.FATAL_LOG and crash.nodes == ("n2",)
    assert crash.category is Category.GPU_HARDWARE and crash.evidence[0].xid == 79
    state.observe(JobStatus(time=6.0, job_id=JOB, state=JobState.FAILED))
    assert state.check(6.0) == (), "the failed state of the same attempt is not a second crash"
    assert state.check(100.0) == (), "a crashed attempt is not also reported as hung"


def test_non_fatal_events_and_events_outside_a_run_are_ignored() -> None:
    state = JobDetectorState(JOB)
    state.observe(JobStatus(time=0.0, job_id=JOB, state=JobState.RUNNING))
    state.observe_event(xid79(role=Role.CASCADE), now=1.0)
    state.observe_event(xid79(hint=ActionHint.IGNORE), now=1.0)
    assert state.check(1.0) == ()
    stopped = JobDetectorState(JOB)
    stopped.observe(JobStatus(time=0.0, job_id=JOB, state=JobState.PENDING))
    stopped.observe_event(xid79(), now=1.0)
    assert stopped.check(1.0) == ()


def test_non_finite_loss_is_a_nan_crash() -> None:
    state = JobDetectorState(JOB)
    state.observe(JobStatus(time=0.0, job_id=JOB, state=JobState.RUNNING))
    state.observe(Progress(time=1.0, job_id=JOB, iteration=5, rank=0, loss=0.5, step_time=0.01))
    assert state.check(1.0) == ()
    state.observe(Progress(time=1.1, job_id=JOB, iteration=6, rank=1, node="n2", loss=math.nan))
    (nan,) = state.check(1.2)
    assert nan.kind is Kind.CRASH and nan.nan and nan.trigger is Trigger.NAN_LOSS
    assert nan.category is Category.APPLICATION and nan.iteration == 6 and nan.ranks == (1,)
    state.observe(Progress(time=1.2, job_id=JOB, iteration=7, rank=1, loss=math.inf))
    assert state.check(1.3) == ()


def test_nan_signature_line() -> None:
    event = Event(
        signature="train.loss_nan",
        category=Category.APPLICATION,
        kind=Kind.CRASH,
        role=Role.PRIMARY,
        line=9,
        text="Loss is NaN at iteration 120",
    )
    assert is_nan_event(event)
    assert not is_nan_event(xid79())
    overflow = Event(
        signature="nan.loss_scale_overflow",
        category=Category.APPLICATION,
        kind=Kind.NONE,
        role=Role.CONTEXT,
        line=3,
        text="Gradient overflow. Skipping step, loss scaler 0 reducing loss scale to 32768.0",
    )
    assert not is_nan_event(overflow), "fp16 loss-scale overflow is routine"
    state = JobDetectorState(JOB)
    state.observe(JobStatus(time=0.0, job_id=JOB, state=JobState.RUNNING))
    state.observe_event(event, now=3.0)
    (nan,) = state.check(3.0)
    assert nan.nan and nan.trigger is Trigger.NAN_LOG and nan.category is Category.APPLICATION


def catalogue_events() -> list[Event]:
    from trainmedic.core.signatures.catalogue import load_catalogue

    return [
        Event(s.id, s.category, s.kind, s.role, 1, s.examples[0] if s.examples else "")
        for s in load_catalogue().signatures
    ]


def test_nan_rule_agrees_with_the_signature_catalogue() -> None:
    for event in catalogue_events():
        expected = (
            event.signature.startswith("nan.")
            and event.kind is Kind.CRASH
            and event.role is Role.PRIMARY
        )
        assert is_nan_event(event) == expected, event.signature


def test_real_gloo_timeout_line_cuts_a_hang_short() -> None:
    from trainmedic.core.logparse.prefix import parse_prefix
    from trainmedic.core.signatures.catalogue import load_catalogue
    from trainmedic.core.signatures.matcher import Matcher

    matcher = Matcher(load_catalogue())
    text = (
        "[rank0]: RuntimeError: [/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81]"
        " Timed out waiting 30000ms for recv operation to complete"
    )
    prefix = parse_prefix(text)
    events = [
        matcher.to_event(
            hit, line=1, text=text, source="x", evidence=EvidenceSource.APP_LOG, prefix=prefix
        )
        for hit in matcher.match(text)
    ]
    state = JobDetectorState(JOB)
    state.observe(JobStatus(time=0.0, job_id=JOB, state=JobState.RUNNING))
    state.observe(Progress(time=1.0, job_id=JOB, iteration=1, rank=0, step_time=0.01))
    for event in events:
        state.observe_event(event, now=2.0)
    kinds = [(a.kind, a.trigger) for a in state.check(2.0)]
    assert kinds == [(Kind.HANG, Trigger.COMM_TIMEOUT)], [e.signature for e in events]
