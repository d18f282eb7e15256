"""Per-batch and per-operator metrics of a running query, exported for Prometheus.

Usage::

    metrics = RunnerMetrics(job="wordcount", stateful=["counts"])
    # the listener: operators.driver.listener
    spark.streams.addListener(ProgressListener(metrics, backlog=backlog_fn))
    poller = StagePoller(metrics, rest=pool.rest, query_id=lambda: query.id)  # .stages
    poller.start()
    metrics.serve(port=9108)                       # GET /metrics

Three sources, because none has everything (docs/spark-facts.md):

* the ``StreamingQueryListener`` (:mod:`operators.driver.listener`; ``onQueryProgress`` once per
  batch, ``onQueryIdle`` for a trigger without new data, on Spark's listener thread): rates,
  batch duration and its parts, state rows/bytes/memory/partitions per stateful operator,
  source offsets (hence the backlog), the last committed batch. It only parses JSON and sets
  gauges, then hands the batch id to the poller.
* the checkpoint's offsets log, read by the runner about once a second
  (:func:`operators.state.inflight.batch_in_flight`, :meth:`RunnerMetrics.observe_in_flight`):
  the batch running now (id, start, planned input rows), which the listener only hears of when
  it ends.
* the driver UI REST API, polled by :class:`operators.driver.stages.StagePoller` on its own
  thread (never the query's): per stage of the batch the task count (= partitions), rows, busy
  task time, wall time, max and median task time (skew), and which executor ran each task.

Stage names: a stage that reads no shuffle is the read stage (``source``); stages that read a
shuffle are the stateful operators in pipeline order (``stateful``), any beyond them
``stateless``. A user's own job (``spec.application``) has no operator names of ours: its
stateful operators are named from its plan's progress (``aggregate``, ``join``, ``deduplicate``,
``aggregate#2``: :func:`operators.names.operator_names`). Every metric is declared in
:mod:`contracts.metric_names` (documented in docs/runner.md).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Summary,
    disable_created_metrics,
    start_http_server,
)

from contracts import metric_names as M
from contracts.runner_api import Phase
from operators.driver.stages import StageSample
from operators.names import operator_names
from operators.sources.base import SourceBacklog

disable_created_metrics()  # type: ignore[no-untyped-call]  # *_created series: noise here
BATCH_PARTS = ("addBatch", "commitOffsets", "getBatch", "latestOffset", "queryPlanning",
               "walCommit", "triggerExecution")


@dataclass(frozen=True)
class LatestValues:
    """The runner's latest figures as ``/status`` shows them: each None (stages: empty) until
    the event that sets it has happened (a batch's progress, an idle trigger, the offsets log's
    batch in flight, a stage poll)."""

    batch: int | None = None
    batch_duration_seconds: float | None = None
    overhead_seconds: float | None = None
    input_rows_per_second: float | None = None
    processed_rows_per_second: float | None = None
    arrival_rows_per_second: float | None = None
    backlog_records: float | None = None
    backlog_age_seconds: float | None = None
    progress_at: float | None = None
    """When the last progress event arrived (Unix s)."""
    batch_in_flight: int | None = None
    batch_in_flight_started_at: float | None = None
    batch_in_flight_rows: float | None = None
    stages_batch: int | None = None
    """The batch whose stages were polled last; None: never polled."""
    stages: tuple[StageSample, ...] = ()
    stateful_tasks_by_executor: Mapping[str, int] = field(default_factory=dict)


class RunnerMetrics:
    """The Prometheus registry of one runner (every metric of :mod:`contracts.metric_names`),
    and the latest values for ``/status`` (:meth:`latest`)."""

    def __init__(self, job: str, stateful: Sequence[str] | None = ()) -> None:
        self.job = job
        self.stateful = list(stateful or [])
        self._from_plan = stateful is None  # the user's own job: names from its plan
        self.registry = CollectorRegistry()
        self._latest = LatestValues()
        self._lock = threading.Lock()
        self._arrivals: tuple[float, float] | None = None
        self._input_rows: dict[int, float] = {}
        self._kafka_partitions: set[tuple[str, str]] = set()
        r = self.registry

        def g(m: M.Metric) -> Gauge:
            assert m.type == "gauge", m
            return Gauge(m.full, m.help, list(m.labels), registry=r)

        def c(m: M.Metric) -> Counter:
            assert m.type == "counter", m
            return Counter(m.full, m.help, list(m.labels), registry=r)

        def s(m: M.Metric) -> Summary:
            assert m.type == "summary", m
            return Summary(m.full, m.help, list(m.labels), registry=r)

        self.up = g(M.UP)
        self.phase = g(M.PHASE)
        self.arrival_rate = g(M.ARRIVAL_RATE)
        self.input_rate = g(M.INPUT_RATE)
        self.processed_rate = g(M.PROCESSED_RATE)
        self.input_rows = c(M.INPUT_ROWS)
        self.batches = c(M.BATCHES)
        self.batch_duration = g(M.LAST_BATCH_DURATION)
        self.batch_duration_sum = s(M.BATCH_DURATION)
        self.batch_part = g(M.LAST_BATCH_PART)
        self.batch_part_sum = s(M.BATCH_PART)
        self.overhead = g(M.LAST_BATCH_OVERHEAD)
        self.overhead_sum = s(M.BATCH_OVERHEAD)
        self.trigger = g(M.TRIGGER_INTERVAL)
        self.backlog_records = g(M.BACKLOG_RECORDS)
        self.backlog_age = g(M.BACKLOG_AGE)
        self.executors = g(M.EXECUTORS)
        self.executor_cores = g(M.EXECUTOR_CORES)
        self.target_executors = g(M.TARGET_EXECUTORS)
        self.task_slots = g(M.TASK_SLOTS)
        self.source_partitions = g(M.SOURCE_PARTITIONS)
        self.state_partitions = g(M.STATE_PARTITIONS)
        self.kafka_behind = g(M.KAFKA_BEHIND)
        self.kafka_age = g(M.KAFKA_AGE)
        self.last_batch = g(M.LAST_COMMITTED_BATCH)
        self.last_progress = g(M.LAST_PROGRESS)
        self.in_flight_start = g(M.BATCH_IN_FLIGHT_START)
        self.in_flight_id = g(M.BATCH_IN_FLIGHT_ID)
        self.in_flight_rows = g(M.BATCH_IN_FLIGHT_ROWS)
        self.admission_cap = g(M.ADMISSION_CAP)
        self._in_flight: int | None = None
        self._committed: int | None = None
        self.failures = c(M.QUERY_FAILURES)
        self.failed_tasks = c(M.FAILED_TASKS)
        self.executors_lost = c(M.EXECUTORS_LOST)
        self.last_executor_loss = g(M.LAST_EXECUTOR_LOSS)
        self.actions = c(M.ACTIONS)
        self.action_seconds = g(M.LAST_ACTION_SECONDS)
        self.action_step_seconds = g(M.ACTION_STEP_SECONDS)
        self.last_restart = g(M.LAST_RESTART_SECONDS)
        self.state_rows = g(M.STATE_ROWS)
        self.state_bytes = g(M.STATE_BYTES)
        self.state_memory = g(M.STATE_MEMORY)
        self.state_op_partitions = g(M.STATE_OPERATOR_PARTITIONS)
        self.state_rows_updated = c(M.STATE_ROWS_UPDATED)
        self.stage_rows = c(M.STAGE_ROWS)
        self.stage_busy = c(M.STAGE_BUSY)
        self.stage_wall = c(M.STAGE_WALL)
        self.stage_batches = c(M.STAGE_BATCHES)
        self.stage_tasks = g(M.STAGE_TASKS)
        self.stage_max_task = g(M.STAGE_MAX_TASK)
        self.stage_median_task = g(M.STAGE_MEDIAN_TASK)
        self.executor_tasks = c(M.EXECUTOR_TASKS)
        self.memory_ratio = g(M.EXECUTOR_MEMORY_RATIO)
        self.up.labels(job).set(1)
        self.in_flight_start.labels(job).set(0)
        self.set_phase(Phase.STARTING)

    def serve(self, port: int, addr: str = "127.0.0.1") -> Any:
        """Serve ``/metrics`` on ``addr:port`` in a daemon thread; returns the server."""
        return start_http_server(port, addr=addr, registry=self.registry)

    def set_phase(self, phase: Phase) -> None:
        for p in Phase:
            self.phase.labels(self.job, p.value).set(1 if p == phase else 0)

    def set_executors(self, live: int | None, target: int | None, cores: int) -> None:
        self.executor_cores.labels(self.job).set(cores)
        if live is not None:
            self.executors.labels(self.job).set(live)
            self.task_slots.labels(self.job).set(live * cores)
        if target is not None:
            self.target_executors.labels(self.job).set(target)

    def set_admission_cap(self, records: int | None) -> None:
        """The admission cap the query was started with (records per batch; None: none)."""
        if records is None:
            with contextlib.suppress(KeyError):
                self.admission_cap.remove(self.job)
        else:
            self.admission_cap.labels(self.job).set(records)

    def observe_progress(self, p: dict[str, Any], backlog: SourceBacklog | None) -> None:
        """One ``StreamingQueryProgress`` (as JSON dict): set every per-batch metric."""
        j = self.job
        now = time.time()
        dur = p.get("durationMs") or {}
        rows = float(p.get("numInputRows") or 0)
        total = (dur.get("triggerExecution") or p.get("batchDuration") or 0) / 1000.0
        overhead = max(0.0, total - (dur.get("addBatch") or 0) / 1000.0)
        self.batches.labels(j).inc()
        self.input_rows.labels(j).inc(rows)
        self.batch_duration.labels(j).set(total)
        self.batch_duration_sum.labels(j).observe(total)
        self.overhead.labels(j).set(overhead)
        self.overhead_sum.labels(j).observe(overhead)
        for part in BATCH_PARTS:
            if part in dur:
                self.batch_part.labels(j, part).set(dur[part] / 1000.0)
                self.batch_part_sum.labels(j, part).observe(dur[part] / 1000.0)
        _set(self.input_rate.labels(j), p.get("inputRowsPerSecond"))
        _set(self.processed_rate.labels(j), p.get("processedRowsPerSecond"))
        self.last_batch.labels(j).set(int(p.get("batchId", -1)))
        self.last_progress.labels(j).set(now)
        with self._lock:
            self._committed = int(p.get("batchId", -1))
            ended = self._in_flight is not None and self._in_flight <= self._committed
        if ended:
            self.observe_in_flight(None)
        if self._from_plan and p.get("stateOperators"):
            self.stateful = operator_names(p["stateOperators"])
        for i, op in enumerate(p.get("stateOperators") or []):
            name = self.stateful[i] if i < len(self.stateful) else f"stateful-{i}"
            custom = op.get("customMetrics") or {}
            self.state_rows.labels(j, name).set(op.get("numRowsTotal") or 0)
            self.state_memory.labels(j, name).set(op.get("memoryUsedBytes") or 0)
            self.state_bytes.labels(j, name).set(
                custom.get("rocksdbSstFileSize", op.get("memoryUsedBytes") or 0))
            self.state_rows_updated.labels(j, name).inc(op.get("numRowsUpdated") or 0)
            if op.get("numShufflePartitions"):
                self.state_op_partitions.labels(j, name).set(op["numShufflePartitions"])
                self.state_partitions.labels(j).set(op["numShufflePartitions"])
        arrival = None
        if backlog is not None:
            _set(self.backlog_records.labels(j), backlog.records)
            _set(self.backlog_age.labels(j), backlog.age_seconds)
            if backlog.source_partitions:
                self.source_partitions.labels(j).set(backlog.source_partitions)
            for topic, partition, behind, age in backlog.partition_lags:
                label = str(partition)
                with self._lock:
                    self._kafka_partitions.add((topic, label))
                self.kafka_behind.labels(j, topic, label).set(behind)
                if age is None:  # unknown: drop a stale reading rather than keep it
                    with contextlib.suppress(KeyError):
                        self.kafka_age.remove(j, topic, label)
                else:
                    self.kafka_age.labels(j, topic, label).set(age)
            if backlog.arrived_total is not None:
                with self._lock:
                    prev = self._arrivals
                    if prev is not None and now > prev[0]:
                        arrival = (backlog.arrived_total - prev[1]) / (now - prev[0])
                    self._arrivals = (now, backlog.arrived_total)
        if arrival is None:
            arrival = p.get("inputRowsPerSecond")
        _set(self.arrival_rate.labels(j), arrival)
        with self._lock:
            self._input_rows[int(p.get("batchId", -1))] = rows
            while len(self._input_rows) > 64:
                self._input_rows.pop(min(self._input_rows))
            self._latest = replace(
                self._latest,
                batch=p.get("batchId"), batch_duration_seconds=total, overhead_seconds=overhead,
                input_rows_per_second=p.get("inputRowsPerSecond"),
                processed_rows_per_second=p.get("processedRowsPerSecond"),
                arrival_rows_per_second=arrival,
                backlog_records=backlog.records if backlog else None,
                backlog_age_seconds=backlog.age_seconds if backlog else None,
                progress_at=now,
            )

    def observe_arrived(self, arrived_total: float, now: float | None = None) -> None:
        """The source's records arrived in all, read by the runner while a batch runs and
        nothing commits (``JobRunner._probe_source``): the arrival rate between two readings,
        in the same series as the progress events' (a reading after a batch and one during the
        next measure one rate). A job started into a burst runs a first batch of a minute on
        one executor: without this its arrival was unknown until that batch committed, and the
        engine said NoMetrics while the burst piled up
        (``test_latest_values.py::test_arrival_is_known_while_a_long_batch_runs``)."""
        now = time.time() if now is None else now
        with self._lock:
            prev = self._arrivals
            self._arrivals = (now, arrived_total)
            if prev is None or now <= prev[0]:
                return
            arrival = max(0.0, arrived_total - prev[1]) / (now - prev[0])
            self._latest = replace(self._latest, arrival_rows_per_second=arrival)
        self.arrival_rate.labels(self.job).set(arrival)

    def observe_backlog_while_running(self, backlog: SourceBacklog, now: float | None = None
                                      ) -> None:
        """The backlog read by the runner while a batch runs and nothing commits
        (``JobRunner._probe_source``: the last committed batch's end offsets asked of the source
        now): the records waiting and the oldest one's age keep growing while a batch hangs --
        on executors lost with their node, say -- instead of standing at the last commit's
        values (``test_latest_values.py::test_the_backlog_age_grows_while_a_batch_hangs``).
        Its ``arrived_total`` feeds the arrival rate as :meth:`observe_arrived` does."""
        j = self.job
        _set(self.backlog_records.labels(j), backlog.records)
        _set(self.backlog_age.labels(j), backlog.age_seconds)
        with self._lock:
            self._latest = replace(self._latest, backlog_records=backlog.records,
                                   backlog_age_seconds=backlog.age_seconds)
        if backlog.arrived_total is not None:
            self.observe_arrived(backlog.arrived_total, now)

    def observe_idle(self) -> None:
        """Spark's ``onQueryIdle``: a trigger found no new data in any source. Nothing waits and
        nothing arrived since the last batch, so the backlog and the arrival rate are 0: known,
        not the last batch's values left standing.

        Since Spark 3.5 such a trigger posts no progress event (measured on 4.3: a query
        resumed from its checkpoint with nothing to read posts only ``onQueryIdle``, every
        ``spark.sql.streaming.noDataProgressEventInterval``). Without this, a job whose input
        stopped kept its last arrival rate, and one restarted into an empty source had an
        unknown backlog: both read as "no batch committed while data waits", a failure.
        ``last_progress`` stays the time of the last batch.
        """
        j = self.job
        self.arrival_rate.labels(j).set(0.0)
        self.backlog_records.labels(j).set(0.0)
        self.backlog_age.labels(j).set(0.0)
        with self._lock:
            partitions = list(self._kafka_partitions)
            self._latest = replace(self._latest, arrival_rows_per_second=0.0,
                                   backlog_records=0.0, backlog_age_seconds=0.0)
        for topic, part in partitions:
            self.kafka_behind.labels(j, topic, part).set(0.0)
            with contextlib.suppress(KeyError):
                self.kafka_age.remove(j, topic, part)

    def observe_in_flight(self, batch: int | None, started_at: float | None = None,
                          rows: float | None = None) -> None:
        """The micro-batch running now (the runner reads it from the offsets log about once a
        second: :func:`operators.state.inflight.batch_in_flight`), or None when none runs.

        The listener only hears of a batch when it ends; without this, a batch running for
        minutes looked like a driver that had stopped (stale metrics, then a failure, and a
        restart that threw its work away). A batch the listener already saw committed is not
        in flight (the reader may have looked just before the commit)."""
        j = self.job
        with self._lock:
            if batch is not None and self._committed is not None and batch <= self._committed:
                batch = None
            if batch is None or started_at is None:
                batch = None
            self._in_flight = batch
            self._latest = replace(
                self._latest, batch_in_flight=batch,
                batch_in_flight_started_at=started_at if batch is not None else None,
                batch_in_flight_rows=rows if batch is not None else None)
        if batch is None:
            self.in_flight_start.labels(j).set(0)
            for gauge in (self.in_flight_id, self.in_flight_rows):
                with contextlib.suppress(KeyError):
                    gauge.remove(j)
            return
        assert started_at is not None
        self.in_flight_start.labels(j).set(started_at)
        self.in_flight_id.labels(j).set(batch)
        if rows is None:
            with contextlib.suppress(KeyError):
                self.in_flight_rows.remove(j)
        else:
            self.in_flight_rows.labels(j).set(rows)

    def observe_stages(self, batch: int, stages: list[StageSample]) -> None:
        """The REST poller's view of one batch: per-stage counters and last-batch gauges."""
        j = self.job
        stateful = iter(self.stateful)
        placement: dict[str, int] = {}
        with self._lock:
            batch_rows = self._input_rows.get(batch)
        sources = [st for st in stages if st.kind == "source"]
        if batch_rows is not None and sources:  # the listener's count is exact; stage I/O is not
            for st in sources:
                st.rows = batch_rows / len(sources)
        for st in stages:
            if st.kind == "source":
                name = "source"
            else:
                name = next(stateful, None) or "stateless"
                st.kind = "stateful" if name != "stateless" else "stateless"
            labels = (j, name, st.kind)
            self.stage_rows.labels(*labels).inc(st.rows)
            self.stage_busy.labels(*labels).inc(st.busy_seconds)
            self.stage_wall.labels(*labels).inc(st.wall_seconds)
            self.stage_batches.labels(*labels).inc()
            self.stage_tasks.labels(*labels).set(st.tasks)
            self.stage_max_task.labels(*labels).set(st.max_task_seconds)
            self.stage_median_task.labels(*labels).set(st.median_task_seconds)
            if st.failed_tasks:
                self.failed_tasks.labels(j).inc(st.failed_tasks)
            for ex, n in st.tasks_by_executor.items():
                self.executor_tasks.labels(j, ex).inc(n)
                if st.kind == "stateful":
                    placement[ex] = placement.get(ex, 0) + n
            st.name = name
        with self._lock:
            self._latest = replace(self._latest, stages_batch=batch,
                                   stages=tuple(replace(s) for s in stages),
                                   stateful_tasks_by_executor=dict(placement))

    def observe_memory(self, used_ratio: float) -> None:
        """The executors' storage memory in use, as a share of what they have (the stage
        poller reads it from the REST API's executors)."""
        self.memory_ratio.labels(self.job).set(used_ratio)

    def latest(self) -> LatestValues:
        """The latest figures for ``/status`` (an immutable snapshot)."""
        with self._lock:
            return self._latest


def _set(gauge: Any, value: Any) -> None:
    if isinstance(value, (int, float)) and value == value:  # NaN stays unset: unknown
        gauge.set(float(value))
