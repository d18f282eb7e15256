"""The local controller: evaluate on a schedule, decide, act through the runner.

collect (a MetricsSnapshot from Prometheus) -> decide (the pure engine) -> act (the runner's
control endpoint, or a recovery callback) -> remember (the bounded history): the core's
``evaluate`` step, shared with the Kubernetes reconciler and the simulator. The policy file is
re-read when it changes; an invalid edit is rejected with its validation message and the last
good policy stays in force.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import structlog
from apscheduler.schedulers.background import BackgroundScheduler

from contracts.history import ScalingHistory
from contracts.manifests import ManifestError, load_policy
from contracts.policy import ScalingPolicySpec
from controller.adapters.prometheus import SnapshotSource
from controller.adapters.promql import Window
from controller.core import Action, Decision, Evaluation, MetricsSnapshot, evaluate, log_fields

log = structlog.get_logger("stream_autoscaler.controller")
logging.getLogger("apscheduler").setLevel(logging.ERROR)  # "skipped: max instances" is expected
"""An action (a repartition) can outlast the interval; the skipped runs are by design."""


SETTLE_SECONDS = 1.0
"""A changed policy file is adopted only once it has not changed for this long: an editor or a
``cp`` still writing it leaves a prefix that may parse (missing sections take defaults) — a
half-written policy must not become the policy in force."""


class PolicyFile:
    """A ScalingPolicy file, re-read when its modification time changes and the write settled."""

    def __init__(
        self, path: str | Path, recommend_only: bool = False, max_executors: int | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.path = Path(path)
        self.clock = clock
        self.recommend_only = recommend_only
        """Force ``mode: recommend`` (a baseline run that must never act)."""
        self.max_executors = max_executors
        """Cap ``executors.max`` (the local demo: no more executors than the machine has cores)."""
        self.policy = self._load()  # the first load must succeed
        self._mtime = self._stat()
        self.last_error: str | None = None
        self.reloads = 0

    def _load(self) -> ScalingPolicySpec:
        spec = load_policy(self.path).spec
        if self.recommend_only:
            spec = spec.model_copy(update={"mode": "recommend"})
        if self.max_executors is not None and spec.executors.max > self.max_executors:
            bounds = spec.executors.model_copy(
                update={
                    "max": self.max_executors,
                    "min": min(spec.executors.min, self.max_executors),
                    "initial": None,
                }
            )
            spec = spec.model_copy(update={"executors": bounds})
        return spec

    def _stat(self) -> float:
        try:
            return os.stat(self.path).st_mtime
        except OSError:
            return -1.0

    def current(self) -> ScalingPolicySpec:
        """The policy in force: the file's, or the last good one if the file is now invalid."""
        mtime = self._stat()
        if mtime == self._mtime:
            return self.policy
        if self.clock() - mtime < SETTLE_SECONDS:  # still being written: next evaluation
            log.info("policy_settling", file=str(self.path), keeping="current policy")
            return self.policy
        try:
            policy = self._load()
        except ManifestError as e:
            self._mtime = mtime
            self.last_error = "; ".join(e.problems)
            log.error(
                "policy_rejected",
                file=str(self.path),
                problems=e.problems,
                keeping="last good policy",
            )
            return self.policy
        if self._stat() != mtime:  # written again while we read it: read it once it settles
            return self.policy
        self._mtime, self.policy = mtime, policy
        self.last_error = None
        self.reloads += 1
        log.info("policy_reloaded", file=str(self.path), mode=self.policy.mode)
        return self.policy


class Actuator(Protocol):
    """Carries a decision out. Raises on failure; the decision is then not recorded as done."""

    def apply(self, decision: Decision) -> None: ...


@dataclass
class LocalController:
    """Evaluates one job every ``policy.timing.evaluationIntervalSeconds``."""

    job: str
    policy_file: PolicyFile
    source: SnapshotSource
    actuator: Actuator
    clock: Callable[[], float] = time.time
    on_evaluation: Callable[[Evaluation], None] | None = None
    history: ScalingHistory = field(default_factory=ScalingHistory)
    last: Evaluation | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _scheduler: BackgroundScheduler | None = None
    _interval: float = 0.0

    def evaluate(self) -> Evaluation:
        """Collect, decide, act, remember. Never raises: errors become part of the record."""
        with self._lock:
            policy = self.policy_file.current()
            ev = evaluate(self._collect, policy, self.history, self.clock())
            if ev.decision.acts:
                try:
                    self.actuator.apply(ev.decision)
                    ev = ev.carried_out()
                except Exception as e:  # the runner refused or is gone: retry next time
                    ev = ev.refused(f"{type(e).__name__}: {e}")
            self.history = ev.history
            self.last = ev
            log.info("decision", job=self.job, **log_fields(ev), acted=ev.acted, error=ev.error)
            self._reschedule(policy)
        if self.on_evaluation is not None:
            self.on_evaluation(ev)
        return ev

    def _collect(self, window_seconds: float, now: float) -> MetricsSnapshot:
        return self.source.snapshot(self.job, Window(window_seconds), now)

    def _reschedule(self, policy: ScalingPolicySpec) -> None:
        interval = policy.timing.evaluation_interval_seconds
        if self._scheduler is not None and interval != self._interval:
            self._interval = interval
            self._scheduler.reschedule_job("evaluate", trigger="interval", seconds=interval)

    def start(self) -> None:
        """Evaluates on a timer (apscheduler), one evaluation at a time."""
        self._interval = self.policy_file.policy.timing.evaluation_interval_seconds
        self._scheduler = BackgroundScheduler(daemon=True)
        self._scheduler.add_job(
            self.evaluate,
            "interval",
            seconds=self._interval,
            id="evaluate",
            max_instances=1,
            coalesce=True,
        )
        self._scheduler.start()

    def stop(self) -> None:
        if self._scheduler is not None:
            self._scheduler.shutdown(wait=True)
            self._scheduler = None


def is_action(decision: Decision) -> bool:
    """Whether a decision changes the job (for counting and markers)."""
    return decision.action is not Action.HOLD
