"""The runner's actions: accept one at a time (idempotent by id), run it in the background, and
record how it went (:class:`contracts.runner_api.ActionRecord`).

:class:`Actions` belongs to :class:`operators.driver.runner.JobRunner` and reaches it only
through :class:`RunnerHandle` (its session, pool, query and phase, and the steps an action is made
of). It holds the running and recent actions, accepts ``submit``/``find_action`` and runs the
three actions of :class:`contracts.runner_api.ActionKind`:

* ``executors``: reach an absolute executor count (kills the executors holding least state),
  timing ``executors_live`` and ``first_task``; a scale-in stops the query first (timing
  ``stop``, ``resumed``), so no running task dies with its executor, and the resumed query
  replays the batch the stop caught in flight;
* ``repartition``: the SEEP move: stop, repartition the checkpoint (with rollback,
  :mod:`operators.state.repartition`) as of its last committed batch, resume (a batch the stop
  caught in flight is skipped where no reader can see what it wrote, else run to its commit
  before the rewrite), timing ``stop``, ``repartition``,
  ``first_commit``; ``partitions`` equal to the current count restarts at a batch boundary
  without repartitioning (the state is loaded again across the current executors);
* ``stop``: stop at a batch boundary;

and each records the seconds every :class:`contracts.runner_api.Step` alone took
(``ActionRecord.steps``, the ``action_step_seconds`` gauge).
"""

from __future__ import annotations

import collections
import contextlib
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import structlog

from contracts.runner_api import (
    RECENT_ACTIONS,
    ActionKind,
    ActionRecord,
    ActionRequest,
    ActionState,
    ConflictResponse,
    ExecutorsRequest,
    Phase,
    RepartitionRequest,
    RequestError,
    Step,
    accepts,
    find_action,
)
from contracts.streamjob import StreamJobSpec
from operators import state
from operators.errors import OperatorsError, first_line
from operators.query.sinks import forget_unfinished_batch
from operators.steps import timed

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

    from operators.driver.exporter import RunnerMetrics
    from operators.query.session import ExecutorPool
    from operators.query.warmup import WarmResult

log = structlog.get_logger("operators.driver.runner")

RESTART_WARM_SECONDS = 30.0
"""A restart waits at most this (s) for its executors' warm-up, a running one included: past it
the restart goes on with those still cold (a warm-up only saves time; on a loaded node it can
take minutes)."""
WARM_WAIT_SHOWN = 0.05
"""A restart's wait for a running warm-up shorter than this (s) is no wait (a lock taken
uncontended), and not reported in its timings."""


@dataclass
class RunnerOptions:
    """How to run a job; every field overrides the manifest."""

    master: str | None = None
    max_executors: int | None = None
    """Ceiling for in-place growth (``spark.cores.max``); None = the initial count."""
    executors: int | None = None
    """Executors at start; None = ``spec.executors.initial``."""
    state_partitions: int | None = None
    """Resume at this many state partitions (a recovery with more capacity); None = as the
    checkpoint has them (:meth:`JobRunner._repartition_at_start`)."""
    max_records_per_batch: int | None = None
    """Admission cap of the query (records per micro-batch; the lower of it and the job's own):
    a recovery's, so the outage's pile drains in batches the SLO allows; None = the job's."""
    scale_timeout: float = 120.0
    first_commit_timeout: float = 180.0
    warm_executors: bool = True
    """Warm executors that joined in place (Python workers, the state store, generated code)
    while the query still runs, before a restart puts its first batch on them
    (:mod:`operators.query.warmup`)."""


class ActionConflict(OperatorsError, RuntimeError):
    """An action was requested while another runs, or in a phase that does not allow it."""

    def __init__(self, phase: Phase, action: ActionRecord | None) -> None:
        self.answer = ConflictResponse.of(phase, action)
        super().__init__(self.answer.error)
        self.phase = phase
        self.action = action


class RunnerHandle(Protocol):
    """What the actions use of the runner (:class:`operators.driver.runner.JobRunner`): its
    session, executor pool, query, phase and checkpoint figures, which an action reads and
    moves, and the steps it is made of (stop between batches, start the query, wait for a
    commit). Everything else of the runner is out of the actions' reach."""

    name: str
    phase: Phase
    spark: SparkSession | None
    pool: ExecutorPool | None
    query: StreamingQuery | None
    partitions: int | None
    last_committed_batch: int | None
    resumed_from_batch: int | None
    last_error: str | None
    file_sink: str | None
    max_records_per_batch: int | None
    metrics: RunnerMetrics
    options: RunnerOptions
    initial: int
    spec: StreamJobSpec
    lock: threading.RLock
    stopped: threading.Event

    def set_phase(self, phase: Phase) -> None: ...
    def publish_executors(self) -> None: ...
    def stop_at_boundary(self, steps: dict[str, float] | None = None) -> None: ...
    def stop_for_restart(self, steps: dict[str, float] | None = None) -> int | None: ...
    def drain(self, batch: int, steps: dict[str, float] | None = None) -> None: ...
    def start_query(self) -> None: ...
    def committed(self) -> int: ...
    def wait_commit_after(self, batch: int) -> None: ...
    def warm_executors(self, ids: list[str] | None = None, budget: float | None = None
                       ) -> WarmResult | None: ...
    def warm_in_background(self, ids: list[str]) -> None: ...


class Actions:
    """The runner's actions (see the module docstring), given a narrow handle to the runner."""

    def __init__(self, run: RunnerHandle) -> None:
        self.run = run
        self.action: ActionRecord | None = None
        self.last_action: ActionRecord | None = None
        self.recent_actions: collections.deque[ActionRecord] = collections.deque(
            maxlen=RECENT_ACTIONS)

    def submit(self, request: ActionRequest) -> ActionRecord:
        """Start an action in a background thread; raises ActionConflict or RequestError at once.

        With ``actionId``, the call is idempotent: an action already known by that id (running
        or among the last :data:`RECENT_ACTIONS`) is returned as it is, its ``duplicates``
        counted, and nothing starts again."""
        with self.run.lock:
            known = self.find_action(request.action_id)
            if known is not None:
                known.duplicates += 1
                return known
            if not accepts(self.run.phase, request.kind, busy=self.action is not None):
                raise ActionConflict(self.run.phase, self.action)
            self._validate(request)
            action = ActionRecord(kind=request.kind, params=request.model_dump(
                exclude={"action_id"}))
            if request.action_id:
                action.id = request.action_id
            self.action = action
            self.recent_actions.append(action)
        target = {ActionKind.EXECUTORS: self._scale, ActionKind.REPARTITION: self._repartition,
                  ActionKind.STOP: self._stop_action}[request.kind]
        threading.Thread(target=self._run_action, args=(action, target), daemon=True,
                         name=f"action-{request.kind}").start()
        return action

    @property
    def busy(self) -> bool:
        """An action runs (read under the runner's lock)."""
        return self.action is not None

    def find_action(self, action_id: str | None) -> ActionRecord | None:
        """The running or a recent action with this id."""
        return find_action(self.action, self.recent_actions, action_id)

    def max_executors(self) -> int:
        """The ceiling of ``executors`` targets."""
        return max(self.run.options.max_executors or 0, self.run.initial)

    def _validate(self, request: ActionRequest) -> None:
        if isinstance(request, ExecutorsRequest):
            request.within(self.max_executors())
        if isinstance(request, RepartitionRequest) and self.run.last_committed_batch is None:
            raise RequestError("partitions",
                               "partitions: no committed batch yet; nothing to repartition")

    def _run_action(self, action: ActionRecord, fn: Callable[[ActionRecord], None]) -> None:
        outcome = ActionState.SUCCEEDED
        try:
            fn(action)
            action.state = ActionState.SUCCEEDED
        except Exception as e:
            outcome = ActionState.FAILED
            action.state, action.error = ActionState.FAILED, first_line(e)
            self.run.last_error = f"{action.kind}: {action.error}"
            log.error("action failed", action=action.kind, error=action.error,
                      trace=traceback.format_exc(limit=3))
        finally:
            action.finished_at = time.time()
            action.timings["total"] = action.finished_at - action.started_at
            metrics, name = self.run.metrics, self.run.name
            metrics.actions.labels(name, str(action.kind), str(outcome)).inc()
            for step, secs in action.timings.items():
                metrics.action_seconds.labels(name, str(action.kind), step).set(secs)
            for step, secs in action.steps.items():
                metrics.action_step_seconds.labels(name, str(action.kind), step).set(secs)
            with self.run.lock:
                self.last_action, self.action = action, None
            log.info("action done", **{k: v for k, v in action.to_wire().items() if v})

    def _scale(self, action: ActionRecord) -> None:
        assert self.run.pool is not None
        n = int(action.params["target"])
        self.run.set_phase(Phase.SCALING)
        paused = False
        try:
            t0 = time.monotonic()
            live = self.run.pool.live()
            before = {e.id for e in live}
            weights = {k: float(v) for k, v in
                       self.run.metrics.latest().stateful_tasks_by_executor.items()}
            if len(live) > n and self.run.query is not None and self.run.query.isActive:
                # Graceful scale-in: stop the query before removing executors, so no running
                # task is lost with its executor (a killed executor fails its tasks; the
                # retried tasks are counted as failed and the batch takes longer). A batch the
                # stop caught in flight is replayed by the resumed query, on the executors that
                # stay (Spark's own recovery: same offsets, same state partitions), not run to
                # its end first in a query of its own. Stateful tasks load their state from the
                # checkpoint on the executors that stay.
                replays = self.run.stop_for_restart(steps=action.steps)
                if replays is not None:
                    action.result["replays_batch"] = replays
                paused = True
                action.timings["stop"] = time.monotonic() - t0
                action.result["graceful"] = "batch-boundary"
            with timed(action.steps, Step.EXECUTORS):
                killed = self.run.pool.set_target(n, weights)
            action.result["killed"] = killed
            if paused:
                with timed(action.steps, Step.QUERY_START):
                    self.run.start_query()
                paused = False
                action.timings["resumed"] = time.monotonic() - t0
            with timed(action.steps, Step.EXECUTORS):
                reached = self.run.pool.wait_for(n, self.run.options.scale_timeout)
            if not reached:
                raise TimeoutError(f"{self.run.pool.live_count()} executors live after "
                                   f"{self.run.options.scale_timeout:.0f} s, target {n}")
            action.timings["executors_live"] = time.monotonic() - t0
            added = [e.id for e in self.run.pool.live() if e.id not in before]
            action.result["added"] = added
            self.run.publish_executors()
            # warmed beside the query, not in the first batch of a restart that may follow
            self.run.warm_in_background(added)
            if added:  # request -> a new executor runs a task
                deadline = time.monotonic() + self.run.options.scale_timeout
                while time.monotonic() < deadline:
                    if any(e.total_tasks > 0 for e in self.run.pool.live() if e.id in added):
                        action.timings["first_task"] = time.monotonic() - t0
                        break
                    time.sleep(0.25)
        finally:
            if paused:  # the kill failed: resume on what is left rather than stay stopped
                with contextlib.suppress(Exception):
                    self.run.start_query()
            self.run.set_phase(Phase.RUNNING)

    def _repartition(self, action: ActionRecord) -> None:
        assert self.run.spark is not None
        n = int(action.params["partitions"])
        self.run.set_phase(Phase.REPARTITIONING)
        t0 = time.monotonic()
        old = self.run.partitions
        resumed = False
        try:
            # Executors that joined in place are warmed before the stop (the first batch runs
            # on them): the warm-up their scale-out started is waited for, and those no warm-up
            # reached (Spark's replacements of lost executors) are warmed now, all within
            # RESTART_WARM_SECONDS.
            warmed = self.run.warm_executors(budget=RESTART_WARM_SECONDS)
            if warmed is not None and (warmed.asked or warmed.error
                                       or warmed.waited_seconds > WARM_WAIT_SHOWN):
                action.result["warmup"] = warmed.to_wire()
                action.timings["warmed"] = time.monotonic() - t0
            down_from = time.monotonic()  # the job commits nothing from here to first_commit
            # Same count (a restart that only re-spreads state): Spark replays the batch in
            # flight. A rewrite needs a checkpoint that ends on a committed batch: the batch
            # in flight is skipped where no reader can see what it wrote (the resumed query
            # reads its records again, on the new layout: forget_unfinished_batch), else run
            # to its commit first.
            in_flight = self.run.stop_for_restart(steps=action.steps)
            skip = False
            if in_flight is not None and n == old:
                action.result["replays_batch"] = in_flight
            elif in_flight is not None:
                skip = forget_unfinished_batch(self.run.spark, self.run.spec.sink,
                                               self.run.file_sink, in_flight)
                if skip:
                    action.result["skipped_batch"] = in_flight
                else:
                    self.run.drain(in_flight, steps=action.steps)
            action.timings["stop"] = time.monotonic() - t0
            action.result["batch"] = self.run.last_committed_batch
            if n != old:
                try:
                    res = state.repartition(self.run.spark, self.run.spec.checkpoint.location, n,
                                            file_sink=self.run.file_sink, steps=action.steps,
                                            skip_uncommitted=skip)
                    self.run.partitions = n
                    action.result.update(rows_before=res.rows_before, rows_after=res.rows_after,
                                         rows_before_from=res.rows_before_from,
                                         repartition_batch=res.batch)
                except state.RepartitionError as e:
                    action.result["rolled_back"] = e.rolled_back
                    if not e.rolled_back:  # the checkpoint is in an unknown state: starting a
                        # query on it could lose or double state. Stop here and say so.
                        self.run.set_phase(Phase.FAILED)
                        raise RuntimeError(
                            f"{e}; the query is NOT restarted: inspect the checkpoint "
                            "(stream-autoscaler checkpoint inspect) or restore it from a backup "
                            "(stream-autoscaler checkpoint restore)") from e
                    raise
                finally:
                    action.timings["repartition"] = time.monotonic() - t0
            from_batch = self.run.committed()
            # the resumed query's source rate limit (absent: the job's own)
            self.run.max_records_per_batch = action.params.get("max_records_per_batch")
            with timed(action.steps, Step.QUERY_START):
                self.run.start_query()
            resumed = True
            action.timings["resumed"] = time.monotonic() - t0  # request -> running again
            self.run.resumed_from_batch = from_batch  # the checkpoint batch the query resumed from
            with timed(action.steps, Step.FIRST_COMMIT):
                self.run.wait_commit_after(from_batch)
            action.timings["first_commit"] = time.monotonic() - t0
            # the stop -> the first commit: the time the job committed nothing, what the
            # engine's next restart estimate learns from (its restartSeconds counts the first
            # batch too); a warm-up before the stop ran beside the query and is not in it
            action.timings["down"] = time.monotonic() - down_from
            self.run.metrics.last_restart.labels(self.run.name).set(action.timings["down"])
            self.run.metrics.state_partitions.labels(self.run.name).set(self.run.partitions or 0)
            action.result["partitions"] = self.run.partitions
        finally:
            if not resumed and self.run.phase != Phase.FAILED:
                # Rolled back (or failed before the repartition): resume on the old count.
                with contextlib.suppress(Exception):
                    self.run.start_query()
            if self.run.query is not None and self.run.query.isActive:
                self.run.set_phase(Phase.RUNNING)
            else:  # could not resume even on the old count: say so, do not pretend to run
                self.run.set_phase(Phase.FAILED)

    def _stop_action(self, action: ActionRecord) -> None:
        self.run.set_phase(Phase.STOPPING)
        t0 = time.monotonic()
        if self.run.query is not None and self.run.query.isActive:
            self.run.stop_at_boundary(steps=action.steps)
        action.timings["stop"] = time.monotonic() - t0
        self.run.set_phase(Phase.STOPPED)
        self.run.stopped.set()
