"""Webhook notifications of incidents, advice and actions, never blocking the service loop.

``Notifier.cycle(result)`` turns a cycle's new decisions and executor steps into messages and
puts them on a bounded queue (full: the message is dropped and counted). One background
thread sends each message to every target, retrying a failed send with exponential backoff
(``backoff_s``, doubled per try, at most ``MAX_BACKOFF_S``); a message that still fails counts
in ``trainmedic_webhook_failures_total{target}``. Targets are named ``slack-0``, ``json-1``...
in metrics and logs, never by URL (a Slack webhook URL is a secret).

Payloads: Slack-compatible ``{"text": "..."}`` (incoming webhooks, Mattermost, ...), or the
generic ``{"event": "incident"|"advice"|"action", "time", "job_id", "attempt", ...}``.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

from trainmedic.service.config.sections import NotifyConfig
from trainmedic.service.decisions import Decision
from trainmedic.service.executor import ExecutorEvent

log = logging.getLogger(__name__)
MAX_BACKOFF_S = 60.0
_QUIET_STEPS = ("claimed", "applied")  # bookkeeping, not something a person acts on


@dataclass(frozen=True, slots=True)
class Target:
    name: str
    url: str
    slack: bool


@dataclass(frozen=True, slots=True)
class Message:
    event: str
    body: dict[str, Any]  # the generic JSON
    text: str  # one line for Slack


@dataclass
class NotifierStats:
    sent: Counter[str] = field(default_factory=Counter)
    failures: Counter[str] = field(default_factory=Counter)
    retries: Counter[str] = field(default_factory=Counter)
    dropped: int = 0


def decision_messages(decision: Decision, now: float) -> list[Message]:
    verdict, advice = decision.finding.verdict, decision.advice
    job, attempt = decision.finding.job_id, decision.finding.attempt
    root = verdict.root_cause
    nodes = ", ".join(verdict.implicated.nodes)
    where = f" on {nodes}" if nodes else ""
    incident = {
        "event": "incident",
        "time": now,
        "job_id": job,
        "attempt": attempt,
        "incident_id": decision.incident_id,
        "kind": verdict.kind.value,
        "category": verdict.category.value,
        "confidence": verdict.confidence,
        "nodes": list(verdict.implicated.nodes),
        "root_cause": f"{root.signature}: {root.text[:300]}" if root else None,
        "basis": verdict.basis,
    }
    advised = {
        "event": "advice",
        "time": now,
        "job_id": job,
        "attempt": attempt,
        "incident_id": decision.incident_id,
        "advice_id": advice.id,
        "action": advice.action.value,
        "mode": advice.mode.value,
        "exclude_nodes": list(advice.exclude_nodes),
        "drain_nodes": list(advice.drain_nodes),
        "basis": advice.basis,
    }
    extra = f" excluding {', '.join(advice.exclude_nodes)}" if advice.exclude_nodes else ""
    extra += f", drain {', '.join(advice.drain_nodes)}" if advice.drain_nodes else ""
    return [
        Message(
            "incident",
            incident,
            f"trainmedic: job {job} attempt {attempt}: {verdict.kind.value} / "
            f"{verdict.category.value}{where} (incident {decision.incident_id})",
        ),
        Message(
            "advice",
            advised,
            f"trainmedic: job {job}: advice {advice.id} ({advice.mode.value}): "
            f"{advice.action.value}{extra} -- {advice.basis[:300]}",
        ),
    ]


def action_message(event: ExecutorEvent) -> Message:
    body = {
        "event": "action",
        "time": event.time,
        "job_id": event.job_id,
        "advice_id": event.advice_id,
        "what": event.what,
        "detail": event.detail,
    }
    detail = f": {event.detail}" if event.detail else ""
    text = f"trainmedic: job {event.job_id}: advice {event.advice_id} {event.what}{detail}"
    return Message("action", body, text)


Sender = Callable[[str, dict[str, Any], float], None]
"""Posts JSON to a URL or raises (httpx.HTTPError, or a non-2xx answer as httpx.HTTPStatusError)."""


def http_post(url: str, body: dict[str, Any], timeout_s: float) -> None:
    httpx.post(url, json=body, timeout=timeout_s).raise_for_status()


class Notifier:
    def __init__(
        self,
        config: NotifyConfig,
        *,
        send: Sender = http_post,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.config = config
        self.targets = [Target(f"slack-{i}", u, True) for i, u in enumerate(config.slack_urls)]
        self.targets += [Target(f"json-{i}", u, False) for i, u in enumerate(config.json_urls)]
        self.stats = NotifierStats()
        self._send = send
        self._sleep = sleep
        self._queue: queue.Queue[Message | None] = queue.Queue(maxsize=config.queue_size)
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="trainmedic-notify", daemon=True)
        self._thread.start()

    # -- the loop's side: never blocks ---------------------------------------------------

    def publish(self, message: Message) -> bool:
        """Queue ``message``; False (and counted) when the queue is full."""
        if message.event not in self.config.events or not self.targets:
            return False
        try:
            self._queue.put_nowait(message)
        except queue.Full:
            with self._lock:
                self.stats.dropped += 1
            return False
        return True

    def cycle(self, decisions: list[Decision], executed: list[ExecutorEvent], now: float) -> None:
        """A service cycle's new incidents and advice, and the executor's steps."""
        for decision in decisions:
            if decision.new:
                for message in decision_messages(decision, now):
                    self.publish(message)
        for event in executed:
            if event.what not in _QUIET_STEPS:
                self.publish(action_message(event))

    # -- the sender thread ---------------------------------------------------------------

    def _run(self) -> None:
        while True:
            message = self._queue.get()
            try:
                if message is None:
                    return
                for target in self.targets:
                    self._deliver(target, message)
            finally:
                self._queue.task_done()

    def _deliver(self, target: Target, message: Message) -> None:
        body = {"text": message.text} if target.slack else message.body
        wait = self.config.backoff_s
        for attempt in range(self.config.retries + 1):
            try:
                self._send(target.url, body, self.config.timeout_s)
            except httpx.HTTPError as error:
                if attempt == self.config.retries:
                    with self._lock:
                        self.stats.failures[target.name] += 1
                    log.warning("webhook %s: %s not sent: %s", target.name, message.event, error)
                    return
                with self._lock:
                    self.stats.retries[target.name] += 1
                self._sleep(wait)
                wait = min(MAX_BACKOFF_S, wait * 2)
            else:
                with self._lock:
                    self.stats.sent[target.name] += 1
                return

    def flush(self, timeout_s: float = 10.0) -> bool:
        """Wait until every queued message was handled; False on timeout."""
        deadline = time.monotonic() + timeout_s
        while self._queue.unfinished_tasks:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.02)
        return True

    def close(self, timeout_s: float = 10.0) -> None:
        """Send what is queued (within ``timeout_s``), then stop the thread."""
        self.flush(timeout_s)
        try:
            self._queue.put(None, timeout=1.0)
        except queue.Full:
            return  # still busy: the daemon thread ends with the process
        self._thread.join(timeout_s)

    def collector(self) -> Collector:
        return NotifierCollector(self)


class NotifierCollector(Collector):
    """``/metrics`` for the notifier: messages sent, retried, failed per target; dropped."""

    def __init__(self, notifier: Notifier) -> None:
        self._notifier = notifier

    def collect(self) -> Iterator[Metric]:
        notifier = self._notifier
        with notifier._lock:
            stats = NotifierStats(
                Counter(notifier.stats.sent),
                Counter(notifier.stats.failures),
                Counter(notifier.stats.retries),
                notifier.stats.dropped,
            )
        families = (
            ("trainmedic_webhook_sent", "Webhook messages delivered", stats.sent),
            ("trainmedic_webhook_failures", "Webhook messages given up on", stats.failures),
            ("trainmedic_webhook_retries", "Webhook sends retried", stats.retries),
        )
        for name, doc, counts in families:
            family = CounterMetricFamily(name, doc, labels=["target"])
            for target in notifier.targets:
                family.add_metric([target.name], counts[target.name])
            yield family
        dropped = CounterMetricFamily(
            "trainmedic_webhook_dropped", "Webhook messages dropped: the queue was full"
        )
        dropped.add_metric([], stats.dropped)
        yield dropped
