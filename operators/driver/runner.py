"""The lifecycle of one streaming job in its driver: start, scale, repartition, stop.

Usage::

    runner = JobRunner(job, RunnerOptions(master="spark://127.0.0.1:7077", max_executors=3))
    runner.start()                                           # Starting -> Running
    action = runner.submit(ExecutorsRequest(target=3))       # -> Scaling -> Running (background)
    action = runner.submit(RepartitionRequest(partitions=8))
    runner.submit(StopRequest()); runner.wait_stopped()
    runner.status()                                          # a contracts.runner_api.RunnerStatus

Phases: :class:`contracts.runner_api.Phase`. One action runs at a time; another request
meanwhile raises :class:`ActionConflict` (HTTP 409). The actions themselves (scale, the SEEP
repartition, stop) are in :mod:`operators.driver.actions`; here the lifecycle and the query.
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import TYPE_CHECKING, Any

import structlog

from contracts.runner_api import (
    RECENT_ACTIONS,
    ActionRecord,
    ActionRequest,
    BacklogStatus,
    ExecutorEntry,
    Executors,
    LostExecutorEntry,
    Phase,
    Rates,
    RunnerStatus,
    StageReport,
    StartFirstBatch,
    Step,
)
from contracts.streamjob import StreamJob
from operators import state
from operators.driver.actions import ActionConflict, Actions, RunnerOptions
from operators.driver.exporter import RunnerMetrics
from operators.driver.gap import gap_wait_seconds
from operators.driver.listener import ProgressListener
from operators.driver.stages import StagePoller
from operators.errors import first_line
from operators.query import node_loss, warmup
from operators.query.application import starter_for
from operators.query.job import PROVIDER_KEY
from operators.query.session import ExecutorPool, SessionOptions, create_session
from operators.query.sinks import forget_unfinished_batch
from operators.sources.backlog import backlog_from_progress
from operators.sources.base import SourceBacklog
from operators.sources.registry import adapter_for
from operators.state.inflight import batch_in_flight
from operators.steps import process_seconds, timed

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

log = structlog.get_logger("operators.driver.runner")
__all__ = ["ActionConflict", "ActionRecord", "JobRunner", "RunnerOptions"]

ARRIVAL_PROBE_SECONDS = 5.0
"""While a batch has run this long without committing, the runner asks the source how much has
arrived (no progress event comes until the batch ends), and again at this interval: the arrival
rate is known before a long first batch commits (:meth:`JobRunner._probe_source`)."""


class JobRunner:
    """Runs one StreamJob's query; the control endpoint and the CLI drive it. Its actions are
    an :class:`operators.driver.actions.Actions` holding it as a ``RunnerHandle``."""

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
        self.phase = Phase.STARTING
        self.spark: SparkSession | None = None
        self.pool: ExecutorPool | None = None
        self.query: StreamingQuery | None = None
        self.query_id: str | None = None
        self.partitions: int | None = None
        self.last_committed_batch: int | None = None
        self.resumed_from_batch: int | None = None
        self.last_error: str | None = None
        self.file_sink: str | None = None
        self.max_records_per_batch = self.options.max_records_per_batch
        """The controller's admission cap for the running query (None: the job's own); a
        repartition sets the next query's."""
        self.lock = threading.RLock()
        self.actions = Actions(self)
        self.stopped = threading.Event()
        self._progress = threading.Condition()
        self.starter = starter_for(job)  # our pipeline, or the user's script or function
        self.metrics = RunnerMetrics(self.name, self.starter.stateful_operators())
        source = self.spec.source
        self._backlog_probe = adapter_for(source).backlog_probe(source) if source else None
        self._poller: StagePoller | None = None
        self._lock_file: state.CheckpointLock | None = None
        self._query_started_at = 0.0
        self._arrivals_probed_at = 0.0
        self._node_loss: node_loss.NodeLossSweeper | None = None
        self.lost_executors: list[LostExecutorEntry] = []
        """Executors lost with their node and removed (``/status`` ``lostExecutors``)."""
        self._last_progress: dict[str, Any] | None = None
        """The last batch's progress event: its end offsets are where the backlog starts while
        the next batch runs."""
        self.start_steps: dict[str, float] = {}
        """Seconds of each step of :meth:`start` (``/status`` ``startSteps``); ``first_commit``
        arrives with the first batch's progress."""
        self._first_commit_from: float | None = None
        self._in_flight_at_start: int | None = None
        """The batch the checkpoint held uncommitted when this runner started (a failed
        driver's batch in flight), which the query replays as that driver planned it."""
        self.start_first_batch: StartFirstBatch | None = None
        """The first batch the start committed (``/status`` ``startFirstBatch``)."""
        self.last_warmup: warmup.WarmResult | None = None
        self._warm_lock = threading.Lock()
        """Held by a warm-up (:meth:`warm_executors`): a restart waits for one that runs."""

    # --- lifecycle --------------------------------------------------------------------------

    def start(self) -> None:
        """Check the checkpoint, create the session, settle executors, start the query."""
        from operators.query.job import spark_conf_for

        steps = self.start_steps
        ran = process_seconds()  # the interpreter and the imports: before any step here
        if ran is not None:
            steps[Step.PROCESS.value] = ran
        loc = self.spec.checkpoint.location
        with timed(steps, Step.CHECKPOINT):
            state.configure_object_store(spark_conf_for(self.spec))  # s3a://: its endpoint
            info = state.inspect(loc, expected_job=self.name)  # CheckpointError: refuse
            self._lock_file = state.CheckpointLock(loc)  # held until the process ends
            if not self._lock_file.held:
                log.info("object-store checkpoint: no lock; one driver per checkpoint is the "
                         "deployment's (the controller runs one driver pod)", checkpoint=loc)
            removed = state.rollback_unfinished(loc, info)
            if removed is not None:
                log.warning("rolled back an unfinished repartition", batch=removed,
                            checkpoint=loc)
        self.resumed_from_batch = info.last_committed_batch
        self._in_flight_at_start = info.uncommitted_batch if removed is None else None
        self.last_committed_batch = info.last_committed_batch
        self.partitions = info.partitions or self.spec.state_partitions
        with timed(steps, Step.SESSION):
            self.spark = create_session(
                self.spec, SessionOptions(master=self.options.master,
                                          max_executors=self.options.max_executors,
                                          app_name=f"stream-autoscaler:{self.name}"))
        with timed(steps, Step.EXECUTORS):
            self.pool = ExecutorPool(self.spark, self.spec.executors.cores)
            self._node_loss = self._node_loss_sweeper()
            # executors no node has room for (a recovery onto what a lost node left) are not
            # waited for: they join when a node has room
            room = self._node_loss.without_room if self._node_loss is not None else None
            self.pool.settle(self.initial, without_room=room)
            self.pool.warmed.update(e.id for e in self.pool.live())  # the first batch's
        self.publish_executors()
        self._poller = StagePoller(self.metrics, self.pool.rest, lambda: self.query_id)
        self._poller.start()
        self.spark.streams.addListener(
            ProgressListener(self.metrics, self._backlog, self._poller, self._on_progress))
        self.metrics.trigger.labels(self.name).set(self.spec.trigger.interval_seconds)
        from operators.query.job import source_partitions

        parts = source_partitions(self.spec)
        if parts:
            self.metrics.source_partitions.labels(self.name).set(parts)
        want = self.options.state_partitions
        if want is not None and info.last_committed_batch is not None and want != self.partitions:
            self._repartition_at_start(want)
        self.metrics.state_partitions.labels(self.name).set(self.partitions)
        with timed(steps, Step.QUERY_START):
            self.start_query()
        with self._progress:
            self._first_commit_from = time.monotonic()
        state.write_owner(loc, self.name, self.query_id or "", self.file_sink)
        threading.Thread(target=self._watch, name="query-watch", daemon=True).start()
        self.set_phase(Phase.RUNNING)

    def _repartition_at_start(self, n: int) -> None:
        """Resume at ``n`` state partitions: how a recovery restores with more capacity
        (``runner --state-partitions``). Spark rewrites the state only of a checkpoint that ends
        on a committed batch, and a killed driver may leave one in flight: then first a
        one-batch (``once``) run at the old layout replays it as planned, unless no reader can
        see what that batch wrote: then it is skipped (Spark commits it empty, the resumed query
        reads its records again at ``n``; :func:`operators.query.sinks.forget_unfinished_batch`).
        A user's code may
        write Spark's file sink, whose log must record the repartition's batch: the checkpoint's
        owner record names it (written at every start); a checkpoint from before it was kept
        cannot tell, and then the one-batch run, whose query names the sink, comes first even
        with nothing in flight (reading whatever piled up, uncapped: ``Trigger.Once`` ignores
        read limits). Otherwise a checkpoint that ends on a commit needs no such run: the pile
        of the outage is left to the resumed query's capped batches at ``n``. Then Spark's offline
        repartition, with rollback. A repartition that fails and rolls back leaves the job on
        the old count and says so in ``lastError``; one that cannot roll back fails the start
        (the checkpoint is then in an unknown state: no query may run on it)."""
        assert self.spark is not None
        loc, old, t0 = self.spec.checkpoint.location, self.partitions, time.monotonic()
        info = state.inspect(loc)
        known, file_sink = state.known_file_sink(info.owner)
        if not known and not self.starter.sink_needs_query:
            known = True  # our pipeline never writes Spark's file sink
        in_flight = info.uncommitted_batch
        skip = in_flight is not None and known and forget_unfinished_batch(
            self.spark, self.spec.sink, file_sink, in_flight)
        ran_once = (in_flight is not None and not skip) or not known
        if ran_once:
            with timed(self.start_steps, Step.DRAIN):
                once = self._run_one_batch(f"the batch before repartitioning to {n}")
                file_sink = state.file_sink_path(once)
                info = state.inspect(loc)
        with self._progress:
            self.last_committed_batch = info.last_committed_batch
        try:
            res = state.repartition(self.spark, loc, n, file_sink=file_sink,
                                    steps=self.start_steps, skip_uncommitted=skip)
        except state.RepartitionError as e:
            if not e.rolled_back:
                raise
            self.last_error = f"repartition {old} -> {n} at start rolled back ({e}); " \
                              f"resuming at {old} state partitions"
            log.warning("repartition at start rolled back", error=str(e), partitions=old)
            return
        self.partitions = n
        with self._progress:
            self.last_committed_batch = res.batch
        log.info("repartitioned at start", partitions_before=old, partitions=n, batch=res.batch,
                 rows_before=res.rows_before, rows_after=res.rows_after,
                 rows_before_from=res.rows_before_from, one_batch_run=ran_once,
                 skipped_batch=in_flight if skip else None,
                 seconds=round(time.monotonic() - t0, 1))

    def submit(self, request: ActionRequest) -> ActionRecord:
        """Start an action (:meth:`operators.driver.actions.Actions.submit`)."""
        return self.actions.submit(request)

    def find_action(self, action_id: str | None) -> ActionRecord | None:
        return self.actions.find_action(action_id)

    def max_executors(self) -> int:
        return self.actions.max_executors()

    def wait_stopped(self, timeout: float | None = None) -> bool:
        return self.stopped.wait(timeout)

    def shutdown(self) -> None:
        """Stop everything this runner started (query, poller, session). Idempotent."""
        if self.query is not None and self.query.isActive:
            with contextlib.suppress(Exception):
                self.stop_at_boundary()
        if self._poller is not None:
            self._poller.stop()
        if self.spark is not None:
            with contextlib.suppress(Exception):
                self.spark.stop()
            self.spark = None
        if self._lock_file is not None:
            self._lock_file.release()
            self._lock_file = None
        if self.phase != Phase.FAILED:
            self.set_phase(Phase.STOPPED)
        self.stopped.set()

    def status(self) -> RunnerStatus:
        """What /status shows."""
        live: list[ExecutorEntry] = []
        if self.pool is not None and self.phase != Phase.STOPPED:
            with contextlib.suppress(Exception):
                live = [ExecutorEntry.model_validate(e.__dict__) for e in self.pool.live()]
        m = self.metrics.latest()
        polled = m.stages_batch is not None
        return RunnerStatus(
            job=self.name, phase=self.phase, query_id=self.query_id,
            executors=Executors(live=len(live), target=self.pool.target if self.pool else None,
                                cores=self.spec.executors.cores, entries=live),
            partitions=self.partitions,
            last_committed_batch=self.last_committed_batch,
            resumed_from_batch=self.resumed_from_batch,
            rates=Rates(arrival_rows_per_second=m.arrival_rows_per_second,
                        input_rows_per_second=m.input_rows_per_second,
                        processed_rows_per_second=m.processed_rows_per_second),
            backlog=BacklogStatus(records=m.backlog_records, age_seconds=m.backlog_age_seconds),
            batch_duration_seconds=m.batch_duration_seconds,
            stages=[StageReport.model_validate(s.to_dict()) for s in m.stages] if polled else None,
            stateful_tasks_by_executor=dict(m.stateful_tasks_by_executor) if polled else None,
            last_error=self.last_error,
            max_records_per_batch=self.max_records_per_batch,
            start_steps=dict(self.start_steps),
            start_first_batch=self.start_first_batch,
            lost_executors=list(self.lost_executors),
            warm_executors=sorted(({e.id for e in live} & self.pool.warmed) if self.pool else (),
                                  key=_id_order),
            last_warmup=self.last_warmup.to_wire() if self.last_warmup else None,
            action=self.actions.action, last_action=self.actions.last_action,
            recent_actions=list(self.actions.recent_actions),
        )

    # --- the query --------------------------------------------------------------------------

    def start_query(self) -> None:
        assert self.spark is not None
        self._query_started_at = time.time()
        self.query = self.starter.start(self.spark,
                                        max_records_per_batch=self.max_records_per_batch)
        self.metrics.set_admission_cap(self.max_records_per_batch)
        self.query_id = str(self.query.id)
        self.file_sink = state.file_sink_path(self.query)  # a repartition logs its batch there

    def warm_executors(self, ids: list[str] | None = None, budget: float | None = None
                       ) -> warmup.WarmResult | None:
        """Warm ``ids`` (default: every live executor not yet warm) while the query runs, so a
        restart's first batch does not start their Python workers, state store and code
        (:mod:`operators.query.warmup`); waits for a warm-up already running first. ``budget``
        (seconds) bounds the whole, waiting included (a restart's: it goes on with what is cold
        then; a warm-up still running goes on beside it). None when warming is off
        (``--no-warm-executors``)."""
        if not self.options.warm_executors or self.spark is None or self.pool is None:
            return None
        asked = time.monotonic()
        deadline = None if budget is None else asked + budget
        if not self._warm_lock.acquire(timeout=-1 if budget is None else budget):
            return warmup.WarmResult(asked=[], waited_seconds=time.monotonic() - asked,
                                     error="a warm-up still ran after the restart's budget")
        try:
            waited = time.monotonic() - asked
            live = [e.id for e in self.pool.live()]
            if ids is None:  # a restart's: those no warm-up has tried (a failed one stays cold)
                ids = [i for i in live if i not in self.pool.warm_tried]
            ids = [i for i in ids if i in live and i not in self.pool.warmed]
            source = self.spec.source
            modules = adapter_for(source).worker_modules if source is not None else ()
            result = warmup.warm(self.spark, self.pool.rest, ids, self.spec.executors.cores,
                                 modules, self.spark.conf.get(PROVIDER_KEY, None), deadline)
            result.waited_seconds = waited
            self.pool.warmed.update(result.warmed)
            self.pool.warm_tried.update(result.asked)
            if result.asked:
                self.last_warmup = result
            return result
        finally:
            self._warm_lock.release()

    def warm_in_background(self, ids: list[str]) -> None:
        """Start warming ``ids`` (executors that just joined) beside the query: the scale-out
        is done when they are live, and a restart that follows waits for the warm-up
        (:meth:`warm_executors`) instead of running its first batch on cold JVMs."""
        if self.options.warm_executors and ids:
            threading.Thread(target=self._warm_quietly, args=(ids,), name="warm-executors",
                             daemon=True).start()

    def _warm_quietly(self, ids: list[str]) -> None:
        try:
            self.warm_executors(ids)
        except Exception as e:  # the REST API or the session gone (a stop): nothing to warm
            log.warning("executors not warmed", error=first_line(e), executors=ids)

    def stop_at_boundary(self, steps: dict[str, float] | None = None) -> None:
        """Stop between batches, so the checkpoint ends on a committed batch: a stop for a
        restart (:meth:`stop_for_restart`), then the batch it caught in flight, if any, run to
        its commit (:meth:`drain`)."""
        batch = self.stop_for_restart(steps)
        if batch is not None:
            self.drain(batch, steps)

    def drain(self, batch: int, steps: dict[str, float] | None = None) -> None:
        """Finish ``batch``, left in flight by a stop, with a one-batch (``once``) run: it
        replays the planned batch from the offsets log and ends on a batch boundary.
        (``availableNow`` would instead drain the whole backlog at the old capacity: measured
        100 s under a 6 M-record backlog, the very moment a scale-out is needed.)"""
        assert self.spark is not None
        log.info("stop caught a batch in flight; draining it", batch=batch)
        with timed(steps, Step.DRAIN):
            self._run_one_batch(f"draining batch {batch} (in flight at the stop)", track=True)
            info = state.inspect(self.spec.checkpoint.location)
        if info.uncommitted_batch is not None:
            raise RuntimeError(f"batch {info.uncommitted_batch} still uncommitted after drain")
        with self._progress:
            self.last_committed_batch = info.last_committed_batch

    def _stop_in_gap(self) -> state.CheckpointInfo:
        """Stop the query, in a gap between triggers (``isTriggerActive`` False) if one comes
        while one is expected (:func:`operators.driver.gap.gap_wait_seconds` of the last batch's
        duration); what the checkpoint then holds (a batch in flight, if caught)."""
        q = self.query
        assert q is not None
        wait = gap_wait_seconds(self.metrics.latest().batch_duration_seconds,
                                self.spec.trigger.interval_seconds)
        deadline = time.monotonic() + wait
        while q.isActive and q.status.get("isTriggerActive") and time.monotonic() < deadline:
            time.sleep(0.002)
        q.stop()
        return state.inspect(self.spec.checkpoint.location)

    def _run_one_batch(self, what: str, track: bool = False) -> Any:
        """A one-batch (``once``) run on the checkpoint: it replays the batch in flight from the
        offsets log (or runs the next one) and ends on a batch boundary. Raises, naming ``what``,
        when it does not finish within ``first_commit_timeout`` or fails. ``track``: it is the
        runner's query meanwhile (what ``/status`` and a stop see)."""
        assert self.spark is not None
        once = self.starter.start(self.spark, once=True)
        if track:
            self.query = once
        # pyspark types the timeout int but sends int(timeout * 1000) ms to the JVM: a fraction
        # of a second is kept (an int() here would make 0.5 s a 0 that pyspark refuses)
        if not once.awaitTermination(self.options.first_commit_timeout):  # type: ignore[arg-type]
            once.stop()
            raise TimeoutError(f"{what} did not finish in {self.options.first_commit_timeout:g} s")
        if once.exception() is not None:
            raise RuntimeError(f"{what} failed: {first_line(once.exception() or '')}")
        return once

    def stop_for_restart(self, steps: dict[str, float] | None = None) -> int | None:
        """Stop for a restart on the same checkpoint layout (same state partitions); the batch
        the stop caught in flight, if any, which the next query replays.

        It first looks for a gap between triggers (``isTriggerActive`` False) for as long as one
        is expected (:func:`operators.driver.gap.gap_wait_seconds`): a job whose batches outlast
        the trigger interval has none, and is stopped at once. A batch
        caught in flight is left to the next query: a restarted query replays the planned
        batch from the offsets log (Spark's own recovery, the one a failure takes) on the
        capacity the restart is for. Draining it first would run it on the old layout — under
        overload, on executors the restart is meant to relieve — and start a query twice:
        measured 15-17 s of stop at half a core against ~3.5 s of steady batch.
        """
        with timed(steps, Step.STOP_WAIT):
            info = self._stop_in_gap()
        with self._progress:
            self.last_committed_batch = info.last_committed_batch
        if info.uncommitted_batch is not None:
            log.info("stop caught a batch in flight", batch=info.uncommitted_batch)
        return info.uncommitted_batch

    def committed(self) -> int:
        with self._progress:
            return -1 if self.last_committed_batch is None else self.last_committed_batch

    def wait_commit_after(self, batch: int) -> None:
        deadline = time.monotonic() + self.options.first_commit_timeout
        with self._progress:
            while self.committed() <= batch:
                q = self.query
                if q is not None and not q.isActive:
                    raise RuntimeError(f"query stopped: {first_line(q.exception() or '')}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"no batch committed after {batch} in time")
                self._progress.wait(min(left, 0.5))

    def _on_progress(self, p: dict[str, Any]) -> None:
        with self._progress:
            self.last_committed_batch = int(p["batchId"])
            self._last_progress = p
            if self._first_commit_from is not None:  # the start's first batch: its last step
                self.start_steps[Step.FIRST_COMMIT.value] = (
                    time.monotonic() - self._first_commit_from)
                self._first_commit_from = None
                self.start_first_batch = StartFirstBatch.of_progress(
                    p, self._in_flight_at_start)
                for step, secs in self.start_steps.items():
                    self.metrics.action_step_seconds.labels(self.name, "start", step).set(secs)
            for op in p.get("stateOperators") or []:
                if op.get("numShufflePartitions"):
                    self.partitions = int(op["numShufflePartitions"])
            self._progress.notify_all()
        self.publish_executors()

    def _watch(self) -> None:
        """A query that dies outside an action makes the runner Failed, with the error."""
        ticks = 0
        while not self.stopped.is_set():
            time.sleep(1.0)
            ticks += 1
            self._publish_in_flight()
            if ticks % 5 == 0:  # keep the executor gauges fresh when no batch completes
                self.publish_executors()
            if ticks % int(node_loss.SWEEP_SECONDS) == 0:
                self._remove_lost_executors()
            q = self.query
            with self.lock:
                busy = self.actions.busy
            if busy or self.phase != Phase.RUNNING or q is None:
                continue
            failure = self.starter.failure()  # the user's code failed after its query started
            if failure is not None:
                with contextlib.suppress(Exception):
                    if q.isActive:
                        self.stop_at_boundary()
                self.last_error = failure
            elif not q.isActive:
                self.last_error = first_line(q.exception() or "query terminated")
            else:
                continue
            self.metrics.failures.labels(self.name).inc()
            self.set_phase(Phase.FAILED)

    def _publish_in_flight(self) -> None:
        """The batch running now, from the offsets log (the listener hears of it only when it
        ends). Its start is bounded by the query's: a batch replayed after a restart keeps the
        timestamp it was first planned with."""
        try:
            q = self.query
            if q is None or not q.isActive:
                self.metrics.observe_in_flight(None)
                return
            running = batch_in_flight(self.spec.checkpoint.location)
            if running is None or running.started_at is None:
                self.metrics.observe_in_flight(None)
                return
            started = max(running.started_at, self._query_started_at)
            self.metrics.observe_in_flight(running.batch, started, running.rows)
            self._probe_source(running.ends, started)
        except Exception:  # never let the metrics stop the watch
            log.debug("in-flight batch unknown", exc_info=True)

    def _probe_source(self, ends: tuple[Any, ...], started: float) -> None:
        """What the source holds by now, asked of the source itself once the batch in flight
        has run :data:`ARRIVAL_PROBE_SECONDS` and at that interval after, since no progress
        comes until it commits: the backlog from the last committed batch's end offsets (its
        age grows while a batch hangs on executors lost with their node), or, before any batch
        committed, the records arrived (a job started into a burst: its first batch on one
        executor runs for a minute and nothing else reports arrival)."""
        now = time.time()
        probe = self._backlog_probe
        if probe is None or not ends or now - started < ARRIVAL_PROBE_SECONDS:
            return
        if now - self._arrivals_probed_at < ARRIVAL_PROBE_SECONDS:
            return
        self._arrivals_probed_at = now
        last = self._last_progress
        backlog = backlog_from_progress(last, probe, now) if last is not None else None
        if backlog is not None:
            self.metrics.observe_backlog_while_running(backlog, now)
            return
        counts = [probe.arrived(end, now) for end in ends]
        known = [c for c in counts if c is not None]
        if known and len(known) == len(counts):
            self.metrics.observe_arrived(sum(known), now)

    def _node_loss_sweeper(self) -> node_loss.NodeLossSweeper | None:
        """On Kubernetes, the sweeper of this application's executors lost with their node;
        elsewhere (a standalone master, a driver outside a pod) None."""
        if self.pool is None or self.spark is None:
            return None
        if not str(self.spark.sparkContext.master).startswith("k8s://"):
            return None
        try:
            namespace = self.spark.conf.get("spark.kubernetes.namespace", "default") or "default"
            return node_loss.NodeLossSweeper.in_cluster(namespace, self.pool.app_id)
        except Exception as e:  # no in-cluster token: Spark's own detection stays
            log.warning("executors lost with their node will not be removed early",
                        job=self.name, error=first_line(e))
            return None

    def _remove_lost_executors(self) -> None:
        """Executors whose node stopped reporting: killed in Spark (their tasks run elsewhere
        at once) with the target kept, and their pods force-deleted, so that Spark creates
        replacements (:mod:`operators.query.node_loss` says why Spark alone does not)."""
        sweeper, pool = self._node_loss, self.pool
        if sweeper is None or pool is None:
            return
        try:
            for lost in sweeper.sweep(time.time()):
                log.warning("executor lost with its node", job=self.name, node=lost.node,
                            executor=lost.executor_id, pod=lost.pod)
                pool.kill([lost.executor_id])  # re-asserts the pool's target: Spark replaces it
                sweeper.remove(lost)
                self.metrics.executors_lost.labels(self.name, lost.node).inc()
                self.metrics.last_executor_loss.labels(self.name).set(time.time())
                self.lost_executors = [*self.lost_executors, LostExecutorEntry(
                    executor_id=lost.executor_id, pod=lost.pod, node=lost.node,
                    not_ready_since=lost.not_ready_since, removed_at=time.time(),
                )][-RECENT_ACTIONS:]
        except Exception as e:  # the API server unreachable: the next sweep tries again
            log.warning("lost executors not removed", job=self.name, error=first_line(e))

    def publish_executors(self) -> None:
        if self.pool is not None:
            with contextlib.suppress(Exception):
                self.metrics.set_executors(self.pool.live_count(), self.pool.target,
                                           self.spec.executors.cores)

    def set_phase(self, phase: Phase) -> None:
        self.phase = phase
        self.metrics.set_phase(phase)
        log.info("phase", job=self.name, phase=phase.value)

    def _backlog(self, p: dict[str, Any]) -> SourceBacklog | None:
        return backlog_from_progress(p, self._backlog_probe)


def _id_order(executor_id: str) -> tuple[int, str]:
    """Executor ids in Spark's order (numeric), any other id after them."""
    return (int(executor_id), "") if executor_id.isdigit() else (1 << 62, executor_id)
