"""The lifecycle of one streaming job in its driver: start, scale, repartition, stop.

Usage::

    runner = JobRunner(job, RunnerOptions(master="spark://127.0.0.1:7077", max_executors=3))
    runner.start()                                  # Starting -> Running
    action = runner.submit("executors", target=3)   # Running -> Scaling -> Running (background)
    action = runner.submit("repartition", partitions=8)
    runner.submit("stop"); runner.wait_stopped()

Phases: Starting, Running, Scaling, Repartitioning, Stopping, Stopped, Failed. One action runs
at a time; another request meanwhile raises :class:`Conflict` (HTTP 409). A repartition is the
SEEP move: stop between batches (``isTriggerActive`` False), repartition the checkpoint (with
rollback, :mod:`operators.state.repartition`), resume, and time each step; ``partitions`` equal
to the current count restarts at a batch boundary without repartitioning (the state is loaded
again across the current executors).
"""

from __future__ import annotations

import collections
import contextlib
import re
import threading
import time
import traceback
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import structlog

from contracts.streamjob import BurstSource, StreamJob
from operators import state
from operators.exporter import Backlog, ProgressListener, RunnerMetrics, StagePoller
from operators.session import ExecutorPool, SessionOptions, create_session

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming import StreamingQuery

log = structlog.get_logger("operators.runner")
ACTIONS = ("executors", "repartition", "stop")
RECENT_ACTIONS = 16
"""Actions remembered by id, so a controller that retries after a crash or a lost answer finds
its action instead of starting it again (a controller has at most one action in flight per job,
so 16 covers many restarts)."""
ACTION_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")


class Conflict(RuntimeError):
    """An action was requested while another runs, or in a phase that does not allow it."""

    def __init__(self, phase: str, action: ActionRecord | None) -> None:
        busy = f"; action {action.id} ({action.kind}) in progress" if action else ""
        super().__init__(f"runner is {phase}{busy}")
        self.phase = phase
        self.action = action


@dataclass
class RunnerOptions:
    """How to run a job; every field overrides the manifest."""

    master: str | None = None
    max_executors: int | None = None
    """Ceiling for in-place growth (``spark.cores.max``); None = the initial count."""
    executors: int | None = None
    """Executors at start; None = ``spec.executors.initial``."""
    scale_timeout: float = 120.0
    first_commit_timeout: float = 180.0


@dataclass
class ActionRecord:
    """One control action: what was asked, how it went, how long each step took."""

    kind: str
    params: dict[str, Any]
    id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    state: str = "running"
    started_at: float = field(default_factory=time.time)
    finished_at: float | None = None
    timings: dict[str, float] = field(default_factory=dict)
    result: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    duplicates: int = 0
    """Repeated requests with this id, answered without starting anything."""

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class JobRunner:
    """Runs one StreamJob's query; the control endpoint and the CLI drive it."""

    def __init__(self, job: StreamJob, options: RunnerOptions | None = None) -> None:
        self.job = job
        self.spec = job.spec
        self.name = job.metadata.name
        self.options = options or RunnerOptions()
        self.initial = (
            self.options.executors
            if self.options.executors is not None
            else self.spec.executors.initial
        )
        self.phase = "Starting"
        self.spark: SparkSession | None = None
        self.pool: ExecutorPool | None = None
        self.query: StreamingQuery | None = None
        self.query_id: str | None = None
        self.partitions: int | None = None
        self.last_committed_batch: int | None = None
        self.resumed_from_batch: int | None = None
        self.last_error: str | None = None
        self.action: ActionRecord | None = None
        self.last_action: ActionRecord | None = None
        self.recent_actions: collections.deque[ActionRecord] = collections.deque(
            maxlen=RECENT_ACTIONS)
        self._lock = threading.RLock()
        self._stopped = threading.Event()
        self._progress = threading.Condition()
        from operators.job import stateful_operators

        self.metrics = RunnerMetrics(self.name, stateful_operators(self.spec))
        self._clock = _burst_clock(self.spec.source)
        self._poller: StagePoller | None = None
        self._lock_file: state.CheckpointLock | None = None

    # --- lifecycle --------------------------------------------------------------------------

    def start(self) -> None:
        """Check the checkpoint, create the session, settle executors, start the query."""
        loc = self.spec.checkpoint.location
        info = state.inspect(loc, expected_job=self.name)  # CheckpointError: refuse, no change
        self._lock_file = state.CheckpointLock(loc)  # held until the process ends
        removed = state.rollback_unfinished(loc)
        if removed is not None:
            log.warning("rolled back an unfinished repartition", batch=removed, checkpoint=loc)
        self.resumed_from_batch = info.last_committed_batch
        self.last_committed_batch = info.last_committed_batch
        self.partitions = info.partitions or self.spec.state_partitions
        self.spark = create_session(
            self.spec, SessionOptions(master=self.options.master,
                                      max_executors=self.options.max_executors,
                                      app_name=f"stream-autoscaler:{self.name}"))
        self.pool = ExecutorPool(self.spark, self.spec.executors.cores)
        self.pool.settle(self.initial)
        self._publish_executors()
        self._poller = StagePoller(self.metrics, self.pool.rest, lambda: self.query_id)
        self._poller.start()
        self.spark.streams.addListener(
            ProgressListener(self.metrics, self._backlog, self._poller, self._on_progress))
        self.metrics.trigger.labels(self.name).set(self.spec.trigger.interval_seconds)
        from operators.job import source_partitions

        parts = source_partitions(self.spec)
        if parts:
            self.metrics.source_partitions.labels(self.name).set(parts)
        self.metrics.state_partitions.labels(self.name).set(self.partitions)
        self._start_query()
        state.write_owner(loc, self.name, self.query_id or "")
        threading.Thread(target=self._watch, name="query-watch", daemon=True).start()
        self._set_phase("Running")

    def submit(self, kind: str, action_id: str | None = None, **params: Any) -> ActionRecord:
        """Start an action in a background thread; raises Conflict or ValueError at once.

        With ``action_id``, the call is idempotent: an action already known by that id (running
        or among the last :data:`RECENT_ACTIONS`) is returned as it is, with ``duplicate`` set,
        and nothing starts again."""
        if kind not in ACTIONS:
            raise ValueError(f"unknown action {kind!r}")
        if action_id is not None and not ACTION_ID.match(str(action_id)):
            raise ValueError("actionId: 1-64 characters of [A-Za-z0-9._-]")
        with self._lock:
            known = self.find_action(action_id) if action_id else None
            if known is not None:
                known.duplicates += 1
                return known
            allowed = self.action is None and (
                self.phase == "Running" or (kind == "stop" and self.phase == "Failed"))
            if not allowed:
                raise Conflict(self.phase, self.action)
            self._validate(kind, params)
            action = ActionRecord(kind, params)
            if action_id:
                action.id = action_id
            self.action = action
            self.recent_actions.append(action)
        target = {"executors": self._scale, "repartition": self._repartition,
                  "stop": self._stop_action}[kind]
        threading.Thread(target=self._run_action, args=(action, target), daemon=True,
                         name=f"action-{kind}").start()
        return action

    def find_action(self, action_id: str | None) -> ActionRecord | None:
        """The running or a recent action with this id."""
        if not action_id:
            return None
        if self.action is not None and self.action.id == action_id:
            return self.action
        return next((a for a in self.recent_actions if a.id == action_id), None)

    def wait_stopped(self, timeout: float | None = None) -> bool:
        return self._stopped.wait(timeout)

    def shutdown(self) -> None:
        """Stop everything this runner started (query, poller, session). Idempotent."""
        if self.query is not None and self.query.isActive:
            with contextlib.suppress(Exception):
                self._stop_at_boundary()
        if self._poller is not None:
            self._poller.stop()
        if self.spark is not None:
            with contextlib.suppress(Exception):
                self.spark.stop()
            self.spark = None
        if self._lock_file is not None:
            self._lock_file.release()
            self._lock_file = None
        if self.phase not in ("Failed",):
            self._set_phase("Stopped")
        self._stopped.set()

    def status(self) -> dict[str, Any]:
        """What /status shows."""
        live: list[dict[str, Any]] = []
        if self.pool is not None and self.phase not in ("Stopped",):
            with contextlib.suppress(Exception):
                live = [e.__dict__ for e in self.pool.live()]
        m = self.metrics.snapshot()
        return {
            "job": self.name, "phase": self.phase, "queryId": self.query_id,
            "executors": {"live": len(live), "target": self.pool.target if self.pool else None,
                          "cores": self.spec.executors.cores, "list": live},
            "partitions": self.partitions,
            "lastCommittedBatch": self.last_committed_batch,
            "resumedFromBatch": self.resumed_from_batch,
            "rates": {k: m.get(k) for k in ("arrival_rows_per_second", "input_rows_per_second",
                                            "processed_rows_per_second")},
            "backlog": {"records": m.get("backlog_records"),
                        "ageSeconds": m.get("backlog_age_seconds")},
            "batchDurationSeconds": m.get("batch_duration_seconds"),
            "stages": m.get("stages"),
            "statefulTasksByExecutor": m.get("stateful_tasks_by_executor"),
            "lastError": self.last_error,
            "action": self.action.to_dict() if self.action else None,
            "lastAction": self.last_action.to_dict() if self.last_action else None,
            "recentActions": [a.to_dict() for a in list(self.recent_actions)],
        }

    # --- actions ----------------------------------------------------------------------------

    def _validate(self, kind: str, params: dict[str, Any]) -> None:
        if kind == "executors":
            n = params.get("target")
            ceiling = max(self.options.max_executors or 0, self.initial)
            if not isinstance(n, int) or isinstance(n, bool) or n < 0 or n > ceiling:
                raise ValueError(f"target: an integer in 0..{ceiling} (max executors)")
        if kind == "repartition":
            n = params.get("partitions")
            if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= 4096:
                raise ValueError("partitions: an integer in 1..4096")
            if self.last_committed_batch is None:
                raise ValueError("partitions: no committed batch yet; nothing to repartition")

    def _run_action(self, action: ActionRecord, fn: Any) -> None:
        outcome = "succeeded"
        try:
            fn(action)
            action.state = "succeeded"
        except Exception as e:
            outcome = "failed"
            action.state, action.error = "failed", _first_line(e)
            self.last_error = f"{action.kind}: {action.error}"
            log.error("action failed", action=action.kind, error=action.error,
                      trace=traceback.format_exc(limit=3))
        finally:
            action.finished_at = time.time()
            action.timings["total"] = action.finished_at - action.started_at
            self.metrics.actions.labels(self.name, action.kind, outcome).inc()
            for step, secs in action.timings.items():
                self.metrics.action_seconds.labels(self.name, action.kind, step).set(secs)
            with self._lock:
                self.last_action, self.action = action, None
            log.info("action done", **{k: v for k, v in action.to_dict().items() if v})

    def _scale(self, action: ActionRecord) -> None:
        assert self.pool is not None
        n = int(action.params["target"])
        self._set_phase("Scaling")
        try:
            t0 = time.monotonic()
            before = {e.id for e in self.pool.live()}
            weights = {k: float(v) for k, v in
                       (self.metrics.snapshot().get("stateful_tasks_by_executor") or {}).items()}
            killed = self.pool.set_target(n, weights)
            action.result["killed"] = killed
            if not self.pool.wait_for(n, self.options.scale_timeout):
                raise TimeoutError(f"{self.pool.live_count()} executors live after "
                                   f"{self.options.scale_timeout:.0f} s, target {n}")
            action.timings["executors_live"] = time.monotonic() - t0
            added = [e.id for e in self.pool.live() if e.id not in before]
            action.result["added"] = added
            self._publish_executors()
            if added:  # request -> a new executor runs a task
                deadline = time.monotonic() + self.options.scale_timeout
                while time.monotonic() < deadline:
                    if any(e.total_tasks > 0 for e in self.pool.live() if e.id in added):
                        action.timings["first_task"] = time.monotonic() - t0
                        break
                    time.sleep(0.25)
        finally:
            self._set_phase("Running")

    def _repartition(self, action: ActionRecord) -> None:
        assert self.spark is not None
        n = int(action.params["partitions"])
        self._set_phase("Repartitioning")
        t0 = time.monotonic()
        old = self.partitions
        resumed = False
        try:
            self._stop_at_boundary()
            action.timings["stop"] = time.monotonic() - t0
            action.result["batch"] = self.last_committed_batch
            if n != old:
                try:
                    res = state.repartition(self.spark, self.spec.checkpoint.location, n)
                    self.partitions = n
                    action.result.update(rows_before=res.rows_before, rows_after=res.rows_after,
                                         repartition_batch=res.batch)
                except state.RepartitionError as e:
                    action.result["rolled_back"] = e.rolled_back
                    raise
                finally:
                    action.timings["repartition"] = time.monotonic() - t0
            from_batch = self._committed()
            self._start_query()
            resumed = True
            self.resumed_from_batch = from_batch  # the checkpoint batch the query resumed from
            self._wait_commit_after(from_batch)
            action.timings["first_commit"] = time.monotonic() - t0
            self.metrics.state_partitions.labels(self.name).set(self.partitions or 0)
            action.result["partitions"] = self.partitions
        finally:
            if not resumed and self.phase != "Failed":
                # Rolled back (or failed before the repartition): resume on the old count.
                with contextlib.suppress(Exception):
                    self._start_query()
            if self.query is not None and self.query.isActive:
                self._set_phase("Running")
            else:  # could not resume even on the old count: say so, do not pretend to run
                self._set_phase("Failed")

    def _stop_action(self, action: ActionRecord) -> None:
        self._set_phase("Stopping")
        t0 = time.monotonic()
        if self.query is not None and self.query.isActive:
            self._stop_at_boundary()
        action.timings["stop"] = time.monotonic() - t0
        self._set_phase("Stopped")
        self._stopped.set()

    # --- the query --------------------------------------------------------------------------

    def _start_query(self) -> None:
        from operators.job import build_query

        assert self.spark is not None
        writer = build_query(self.spark, self.spec, query_name=self.name)
        self.query = writer.start()
        self.query_id = str(self.query.id)

    def _stop_at_boundary(self, gap_wait: float = 2.0) -> None:
        """Stop between batches, so the checkpoint ends on a committed batch.

        First look for a gap between triggers (``isTriggerActive`` False) for ``gap_wait`` s.
        A job whose batches outlast the trigger interval has no gap: then stop anyway and, if
        the stop caught a batch in flight, finish it with a one-batch (``once``) run: it replays
        the planned batch from the offsets log and ends on a batch boundary. (``availableNow``
        would instead drain the whole backlog at the old capacity: measured 100 s under a
        6 M-record backlog, the very moment a scale-out is needed.)
        """
        q = self.query
        assert q is not None and self.spark is not None
        deadline = time.monotonic() + gap_wait
        while q.isActive and q.status.get("isTriggerActive") and time.monotonic() < deadline:
            time.sleep(0.002)
        q.stop()
        info = state.inspect(self.spec.checkpoint.location)
        if info.uncommitted_batch is not None:
            log.info("stop caught a batch in flight; draining it", batch=info.uncommitted_batch)
            from operators.job import build_query

            writer = build_query(self.spark, self.spec, query_name=self.name)
            drain = writer.trigger(once=True).start()
            self.query = drain
            finished = drain.awaitTermination(self.options.first_commit_timeout)
            if not finished:
                drain.stop()
                raise TimeoutError("draining the batch in flight did not finish in time")
            if drain.exception() is not None:
                raise RuntimeError(f"draining failed: {_first_line(drain.exception() or '')}")
            info = state.inspect(self.spec.checkpoint.location)
            if info.uncommitted_batch is not None:
                raise RuntimeError(f"batch {info.uncommitted_batch} still uncommitted after drain")
        with self._progress:
            self.last_committed_batch = info.last_committed_batch

    def _committed(self) -> int:
        with self._progress:
            return -1 if self.last_committed_batch is None else self.last_committed_batch

    def _wait_commit_after(self, batch: int) -> None:
        deadline = time.monotonic() + self.options.first_commit_timeout
        with self._progress:
            while self._committed() <= batch:
                q = self.query
                if q is not None and not q.isActive:
                    raise RuntimeError(f"query stopped: {_first_line(q.exception() or '')}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"no batch committed after {batch} in time")
                self._progress.wait(min(left, 0.5))

    def _on_progress(self, p: dict[str, Any]) -> None:
        with self._progress:
            self.last_committed_batch = int(p["batchId"])
            for op in p.get("stateOperators") or []:
                if op.get("numShufflePartitions"):
                    self.partitions = int(op["numShufflePartitions"])
            self._progress.notify_all()
        self._publish_executors()

    def _watch(self) -> None:
        """A query that dies outside an action makes the runner Failed, with the error."""
        ticks = 0
        while not self._stopped.is_set():
            time.sleep(1.0)
            ticks += 1
            if ticks % 5 == 0:  # keep the executor gauges fresh when no batch completes
                self._publish_executors()
            q = self.query
            with self._lock:
                busy = self.action is not None
            if q is not None and not busy and self.phase == "Running" and not q.isActive:
                self.last_error = _first_line(q.exception() or "query terminated")
                self.metrics.failures.labels(self.name).inc()
                self._set_phase("Failed")

    def _publish_executors(self) -> None:
        if self.pool is not None:
            with contextlib.suppress(Exception):
                self.metrics.set_executors(self.pool.live_count(), self.pool.target,
                                           self.spec.executors.cores)

    def _set_phase(self, phase: str) -> None:
        self.phase = phase
        self.metrics.set_phase(phase)
        log.info("phase", job=self.name, phase=phase)

    def _backlog(self, p: dict[str, Any]) -> Backlog | None:
        return backlog_from_progress(p, self._clock)


def backlog_from_progress(p: dict[str, Any], clock: Any) -> Backlog | None:
    """Records waiting and the oldest one's age, from the sources' end and latest offsets.

    Burst offsets are ``{"offset": n, "runStartUs": t0}``; the clock turns an offset into its
    arrival time. Kafka offsets are ``{"topic": {"partition": n}}``; then ``clock`` is the
    source's :class:`operators.sources.kafka.KafkaLagProbe`, which asks the broker for the
    latest offsets and the oldest unread record's timestamp per partition. Other sources with a
    numeric offset give records but no age.
    """
    from operators.sources.kafka import KafkaLagProbe, parse_offsets

    records, age, arrived = 0.0, None, None
    known = False
    partitions: int | None = None
    lags: list[tuple[str, int, float, float | None]] = []
    for s in p.get("sources") or []:
        kafka_end = parse_offsets(s.get("endOffset")) if isinstance(clock, KafkaLagProbe) else None
        if kafka_end is not None:
            kb = clock.backlog(kafka_end, parse_offsets(s.get("latestOffset")))
            known = True
            records += kb.records
            age = kb.age_seconds if age is None else max(age, kb.age_seconds or 0.0)
            arrived = (arrived or 0.0) + kb.latest_total
            partitions = max(kb.partitions, clock.source.min_partitions or 0)
            lags += [(lag.topic, lag.partition, lag.behind, lag.age_seconds) for lag in kb.lags]
            continue
        end, latest = _offset(s.get("endOffset")), _offset(s.get("latestOffset"))
        if end is None or latest is None:
            continue
        known = True
        records += max(0.0, latest[0] - end[0])
        if clock is not None and not isinstance(clock, KafkaLagProbe) and end[1] is not None:
            now = time.time()
            a = clock.backlog_age(int(end[0]), now, end[1])
            age = a if age is None else max(age, a)
            arrived = (arrived or 0.0) + clock.latest_offset(now, end[1])
    if not known:
        return None
    return Backlog(records, age, arrived, source_partitions=partitions, partition_lags=tuple(lags))


def _offset(raw: Any) -> tuple[float, float | None] | None:
    import json

    if raw is None:
        return None
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            return None
    if isinstance(raw, (int, float)):
        return float(raw), None
    if isinstance(raw, dict) and isinstance(raw.get("offset"), (int, float)):
        run = raw.get("runStartUs")
        return float(raw["offset"]), (float(run) / 1e6 if run is not None else None)
    return None


def _burst_clock(source: Any) -> Any:
    """What turns the source's offsets into a backlog: a burst source's clock, a Kafka source's
    lag probe, or None."""
    from contracts.streamjob import KafkaSource

    if isinstance(source, KafkaSource):
        from operators.sources.kafka import KafkaLagProbe

        return KafkaLagProbe(source)
    if not isinstance(source, BurstSource):
        return None
    try:
        from operators.sources.burst import BurstClock

        return BurstClock.for_source(source)
    except Exception:
        return None


def _first_line(e: BaseException | str) -> str:
    for line in str(e).splitlines():
        line = line.strip()
        if line and not line.startswith(("An error occurred", "JVM stacktrace")):
            return line[:400]
    return type(e).__name__ if isinstance(e, BaseException) else "error"
