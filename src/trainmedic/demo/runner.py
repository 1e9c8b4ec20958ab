"""Run the demo: the real service, the local backend, a real DDP job, faults in turn.

Everything is real: ``torchrun`` process groups on four virtual nodes, the example trainer
(gloo on CPU), the service loop with its log/kernel-log followers, the SQLite store, the
executor acting through the local scheduler, and the HTTP API (its URL is printed, so
``trainmedic status --url ...`` works while the demo runs). The runner only injects faults
(through the trainer's fault file) and reads the store to time what happened.

In ``monitor`` mode the service only records advice; the runner then plays the operator
(a plain requeue, as a person would) so the next fault can be shown, and the report says no
trainmedic action was taken.
"""

from __future__ import annotations

import contextlib
import json
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from trainmedic.api.app import create_app
from trainmedic.api.server import ApiServer
from trainmedic.core.accounting import account_job
from trainmedic.core.errors import TrainmedicError
from trainmedic.core.model import Action
from trainmedic.demo.observe import DemoError, DemoObserver
from trainmedic.demo.options import NODES, DemoOptions, demo_config
from trainmedic.demo.report import IncidentReport, Timeline, report_entry
from trainmedic.demo.scenarios import Scenario
from trainmedic.schedulers.base import SchedulerAdapter
from trainmedic.schedulers.local.scheduler import LocalJobSpec, LocalScheduler
from trainmedic.service.loop import Service
from trainmedic.store import (
    AdviceRecord,
    AdviceStatus,
    IncidentRecord,
    JobSpec,
    NotFound,
    Store,
    sqlite_url,
)
from trainmedic.store.facts import load_job_facts


class DemoRunner:
    def __init__(self, options: DemoOptions, say: Callable[[str], None] = print) -> None:
        self.options = options
        self.timeline = Timeline(say)
        self._stop = threading.Event()
        self._cycle_error: BaseException | None = None
        self.unexpected: list[IncidentRecord] = []  # incidents no injected fault explains

    # -- set-up --------------------------------------------------------------------------

    def run(self) -> dict[str, Any]:
        if self.options.workdir is not None:
            self.options.workdir.mkdir(parents=True, exist_ok=True)
            return self._run_in(self.options.workdir)
        with tempfile.TemporaryDirectory(prefix="trainmedic-demo-") as tmp:
            return self._run_in(Path(tmp))

    def _run_in(self, workdir: Path) -> dict[str, Any]:
        config = demo_config(self.options.mode)
        adapter = self._start_scheduler(workdir)
        self.store = Store(sqlite_url(str(workdir / "state.db")))
        self.service = Service(
            config,
            self.store,
            adapter,
            executor_id="demo",
            kernel_logs=self._kernel_logs(),
        )
        self.run_dir = workdir / "run"
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.observe = DemoObserver(
            self.store, self.timeline, self.run_dir, self.options.fault_timeout_s, self.unexpected
        )
        api = (
            ApiServer(create_app(self.store, config, sources=self.service.sources))
            if self.options.api
            else None
        )
        loop = threading.Thread(target=self._loop, name="trainmedic-service", daemon=True)
        try:
            if api is not None:
                api.start()
                self.timeline.say(f"service API at {api.url} (mode {self.options.mode})")
            loop.start()
            return self._scenarios()
        finally:
            self._stop.set()
            loop.join(timeout=10)
            self._stop_scheduler()
            self._record_final_states()
            if api is not None:
                api.stop()
            self.store.close()

    def _loop(self) -> None:
        interval = self.service.config.service.poll_interval_s
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                result = self.service.cycle()
            except TrainmedicError as exc:  # keep the demo alive; the main thread reports
                self._cycle_error = exc
                self.timeline.say(f"service cycle failed: {exc}")
            else:
                for event in result.executed:
                    self.timeline.executor(event)
            self._stop.wait(max(0.0, interval - (time.monotonic() - started)))

    def _record_final_states(self) -> None:
        """The demo cancels its job after its service loop stopped: store what the scheduler
        shows now, so a service started later over this state dir (``trainmedic serve`` for
        the web view) finds the job ended instead of taking it for a hung one."""
        try:
            snapshot = self.service.adapter.poll(tuple(j.job_id for j in self.store.list_jobs()))
            for job in () if snapshot.stale else snapshot.jobs:
                stored = self.store.get_job(job.job_id)
                if stored is None or not job.state.is_terminal() or stored.state == job.state:
                    continue
                with contextlib.suppress(NotFound):  # an attempt never seen running
                    self.store.record_attempt_end(
                        job.job_id, stored.attempt, ended_at=snapshot.time, end_state=job.state
                    )
                self.store.update_job_progress(job.job_id, state=job.state.value)
        except TrainmedicError as exc:  # clean-up: never hide why the demo stopped
            self.timeline.say(f"could not record the job's final state: {exc}")

    # -- the scheduler backend (the Slurm demo overrides these: demo.slurm_job) -----------

    def _start_scheduler(self, workdir: Path) -> SchedulerAdapter:
        # A short stop grace: a hung rank ignores SIGTERM until it is killed.
        self.sched = LocalScheduler(workdir / "cluster", nodes=NODES, grace_s=1.5)
        return self.sched

    def _stop_scheduler(self) -> None:
        self.sched.shutdown(cancel_jobs=True)

    def _kernel_logs(self) -> dict[str, str]:
        return {n: str(self.sched.kernel_log(n)) for n in NODES}

    def _job_nodes(self, job_id: str) -> tuple[str, ...]:
        return self.sched.job(job_id).nodes

    def _job_finished(self, job_id: str) -> bool:
        return self.sched.job(job_id).state.is_terminal()

    # -- the job -------------------------------------------------------------------------

    def _submit(self) -> str:
        command = (
            "-m", "trainmedic.demo.trainer.cli", "--run-dir", str(self.run_dir),
            "--iters", "1000000", "--ckpt-every", "25", "--step-sleep", "0.01",
        )  # fmt: skip
        spec = LocalJobSpec(
            name="demo-ddp", nnodes=2, nproc_per_node=2, command=command, run_dir=str(self.run_dir)
        )
        job_id = self.sched.submit(spec)
        self.service.register(
            job_id,
            JobSpec(
                log_paths=(str(self.run_dir / "job.out"),),
                checkpoint_dir=str(self.run_dir / "checkpoints"),
                kernel_logs=self._kernel_logs(),
                nodes=NODES,
            ),
            name="demo-ddp",
        )
        return job_id

    # -- the faults ----------------------------------------------------------------------

    def _scenarios(self) -> dict[str, Any]:
        submitted = time.time()
        job_id = self._submit()
        self.timeline.say(f"job {job_id}: DDP trainer, 2 nodes x 2 ranks, on 4 virtual nodes")
        first = self.observe.wait_steady(job_id, 30)
        cold_start = self.observe.first_progress(job_id, -1) - submitted
        started = rate_t0 = time.time()
        rate_i0 = first
        self.observe.wait_steady(job_id, 60)
        rate = (self.observe.iteration(job_id) - rate_i0) / max(1e-6, time.time() - rate_t0)
        self.timeline.say(f"training steadily at {rate:.0f} it/s")
        entries: list[IncidentReport] = []
        faults: list[dict[str, Any]] = []
        for number, scenario in enumerate(self.options.scenarios, 1):
            self.observe.wait_steady(job_id, 30)
            entries.extend(self._one(job_id, number, scenario, faults))
            if self._job_finished(job_id):
                break
        end = time.time()
        # The one goodput (core.goodput through the accounting), over the fault window.
        (facts,) = load_job_facts(self.store, job_id)
        ratio = account_job(facts, end).goodput_within(started, end)
        return {
            "incidents": [e.as_json() for e in entries],
            "goodput": None if ratio is None else round(ratio, 4),
            "mode": self.options.mode,
            "actions_taken": self.observe.actions_taken(job_id),
            "job_id": job_id,
            "wall_s": round(end - started, 2),
            "steady_it_per_s": round(rate, 1),
            "cold_start_s": round(cold_start, 2),
            "unexpected": [
                {"kind": i.kind.value, "category": i.category.value, "detected_at": i.detected_at}
                for i in self.unexpected
            ],
        }

    def _inject(self, job_id: str, number: int, scenario: Scenario, faults: list[Any]) -> float:
        fault = {"id": f"demo-{number}-{scenario.fault}", **scenario.trainer_fault}
        if scenario.target == "second_node":
            fault["node"] = self._job_nodes(job_id)[1]
        elif scenario.target == "last_rank":
            fault["rank"] = 3
        if scenario.at_iter_ahead is not None:
            # Ten iterations past a checkpoint (every 25): the retry shows progress first.
            ahead = self.observe.iteration(job_id) + scenario.at_iter_ahead
            fault["at_iter"] = (ahead // 25) * 25 + 10
        faults.append(fault)
        tmp = self.run_dir / "faults.json.tmp"
        tmp.write_text(json.dumps(faults))
        tmp.replace(self.run_dir / "faults.json")
        injected = time.time()
        where = fault.get("node") or (f"rank {fault['rank']}" if "rank" in fault else "all ranks")
        when = f" at iteration {fault['at_iter']}" if "at_iter" in fault else ""
        self.timeline.say(f"inject {scenario.fault} on {where}{when}")
        return injected

    def _one(
        self, job_id: str, number: int, scenario: Scenario, faults: list[Any]
    ) -> list[IncidentReport]:
        seen = {i.id for i in self.store.list_incidents(job_id)}
        injected = self._inject(job_id, number, scenario, faults)
        out: list[IncidentReport] = []
        for expected in scenario.expected_actions:
            incident = self.observe.wait(
                f"trainmedic to detect {scenario.fault}",
                lambda: self.observe.next_incident(job_id, scenario, seen),
                self.options.fault_timeout_s,
            )
            seen.add(incident.id)
            advice = self.observe.advice(incident)
            self.timeline.incident(incident, advice)
            fired = self.observe.fired_at(f"demo-{number}-{scenario.fault}", incident.attempt)
            fault_at = fired if fired is not None else injected
            done_at, productive_at = self._recovery(job_id, scenario, incident, advice)
            out.append(
                report_entry(scenario, incident, advice, fault_at, done_at, productive_at, expected)
            )
        return out

    def _recovery(
        self, job_id: str, scenario: Scenario, incident: IncidentRecord, advice: AdviceRecord
    ) -> tuple[float | None, float | None]:
        """(action done, productive again) times; None where nothing was to be done."""
        if not scenario.interrupts or advice.action is Action.NONE:
            return None, None
        done_at: float | None = None
        if self.options.mode == "action":
            final = self.observe.wait(
                f"the executor to carry out advice {advice.id}",
                lambda: (a := self.store.get_advice(advice.id)).status.is_terminal() and a,
                self.options.fault_timeout_s,
            )
            if final.status is not AdviceStatus.CONVERGED:
                raise DemoError(f"advice {advice.id} ended {final.status.value}: {final.note}")
            done_at = final.converged_at
            if advice.action is Action.STOP:
                return done_at, None
        elif advice.action is Action.STOP:
            return None, None
        else:
            self._operator_restart(job_id)
        return done_at, self.observe.productive_again(job_id, incident.attempt)

    def _operator_restart(self, job_id: str) -> None:
        """Monitor mode: nobody acts for trainmedic, so the demo requeues like a person."""
        self.sched.requeue(job_id, ())
        self.timeline.say("operator: plain requeue (trainmedic only advised)")
