"""How the runner starts a job's query: our YAML pipeline, or the user's own PySpark code run
unmodified (a script, or a ``module:function``).

Usage (the runner; :func:`starter_for` picks the kind from the manifest)::

    starter = starter_for(job)                  # PipelineStarter or ApplicationStarter
    query = starter.start(spark)                # the job's query, started
    query = starter.start(spark, once=True)     # one batch from the checkpoint (the drain)
    starter.failure()                           # what went wrong outside start(), or None

A script runs as ``__main__`` on a thread of the runner, with ``sys.argv = [script, *args]``,
exactly as ``spark-submit script.py args`` would run it. It does not know about us; what makes
it scalable is done around it, in this module and its wrappers
(:mod:`operators.query.application_hooks`) only:

* ``SparkSession.builder.getOrCreate()`` returns the runner's session (Spark's own rule: an
  active session is reused; the builder's master and static settings are ignored, its runtime
  SQL settings such as ``spark.sql.shuffle.partitions`` apply, as they would alone);
* ``DataStreamWriter.start()``/``toTable()`` is wrapped: the query gets the job's checkpoint
  (``spec.checkpoint.location``, durable, so it can be stopped, repartitioned and resumed) and
  the job's trigger, a name if it has none, and is handed to the runner; the script goes on to
  its ``awaitTermination()``;
* ``DataStreamReader.load()`` is wrapped: after a restart the controller capped (a repartition
  or a recovery, :mod:`controller.core.admission`), a Kafka reader gets ``maxOffsetsPerTrigger``
  (the lower of the cap and the script's own), so what piled up while the job was down does not
  land in one giant batch; other readers are left as written;
* ``SparkSession.stop()`` from the script is ignored (the session is the runner's); so is the
  end of the script after its query stopped: a repartition or a recovery stops the query at a
  batch boundary, the script's ``awaitTermination()`` returns, the script ends, and the runner
  runs it again: its query resumes from the checkpoint.

One streaming query per job: a script that starts a second one is refused with an error naming
the line (the second ``start()`` raises in the script, and the runner fails the job after
stopping the first query at a batch boundary), never scaled by half. A script that raises,
ends without starting a streaming query, or starts none within ``start_timeout`` raises
:class:`ApplicationError` naming the script and the line.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import runpy
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import structlog

from contracts.streamjob import Application, StreamJob
from operators.errors import OperatorsError, first_line
from operators.query.application_hooks import BOUND, install_hooks

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

log = structlog.get_logger("operators.query.application")

START_TIMEOUT = 180.0
"""Seconds a script may take to reach its streaming ``start()`` (imports, reading reference
data) before the runner gives up on it."""




class ApplicationError(OperatorsError, RuntimeError):
    """The user's script or function failed, or did something the runner cannot scale.
    ``where`` is ``script.py:LINE`` (or the module function); ``problem`` says what."""

    def __init__(self, where: str, problem: str) -> None:
        super().__init__(f"{where}: {problem}")
        self.where = where
        self.problem = problem


class QueryStarter(Protocol):
    """What the runner asks of a job kind."""

    label: str
    sink_needs_query: bool
    """Whether the query's sink is known only once it starts (a user's code may write Spark's
    file sink, whose log a repartition must extend); our pipeline's is known from the
    manifest and is never Spark's file sink (its files go through ``foreachBatch``)."""

    def start(self, spark: SparkSession, *, once: bool = False,
              max_records_per_batch: int | None = None) -> StreamingQuery:
        """Start the job's query; ``max_records_per_batch``: the admission cap the controller
        set with a restart (the source's rate limit, the lower of it and the job's own)."""
        ...

    def failure(self) -> str | None: ...

    def stateful_operators(self) -> list[str] | None:
        """The stateful operators' names in plan order; None = learn them from the plan."""
        ...


def starter_for(job: StreamJob) -> QueryStarter:
    """The starter for a manifest: our pipeline, or the user's application."""
    if job.spec.application is not None:
        return ApplicationStarter(job)
    return PipelineStarter(job)




# --- our pipeline --------------------------------------------------------------------------------


class PipelineStarter:
    """A job written as our YAML pipeline: :func:`operators.query.job.build_query`."""

    sink_needs_query = False

    def __init__(self, job: StreamJob) -> None:
        self.job = job
        self.label = f"pipeline {job.metadata.name}"

    def start(self, spark: SparkSession, *, once: bool = False,
              max_records_per_batch: int | None = None) -> StreamingQuery:
        from operators.query.job import build_query
        from operators.sources.registry import capped

        spec = self.job.spec
        if max_records_per_batch is not None and spec.source is not None:
            spec = spec.model_copy(update={"source": capped(
                spark, spec.source, max_records_per_batch, spec.checkpoint.location)})
        writer = build_query(spark, spec, query_name=self.job.metadata.name)
        if once:
            writer = writer.trigger(once=True)
        return writer.start()

    def failure(self) -> str | None:
        return None

    def stateful_operators(self) -> list[str] | None:
        from operators.query.job import stateful_operators

        return stateful_operators(self.job.spec)


# --- the user's application ----------------------------------------------------------------------


@dataclass
class _Run:
    """One run of the user's code: what it started, how it ended."""

    once: bool
    max_records_per_batch: int | None = None
    """The admission cap for the query this run starts (set on its Kafka or burst reader)."""
    started: threading.Event = field(default_factory=threading.Event)
    ended: threading.Event = field(default_factory=threading.Event)
    query: StreamingQuery | None = None
    error: ApplicationError | None = None


class _ScriptArgv:
    """``sys.argv`` while scripts run: the newest run's, and the runner's own once none runs.

    A restart (a repartition) runs the script again on a new thread while the previous run is
    still returning from ``awaitTermination()``; had that run restored the argv it found, the new
    run would read the runner's (in CI its output path became the runner's ``job.yaml``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running = 0
        self._runner: list[str] = []

    def enter(self, argv: list[str]) -> None:
        with self._lock:
            if self._running == 0:
                self._runner = sys.argv
            self._running += 1
            sys.argv = argv

    def leave(self) -> None:
        with self._lock:
            self._running -= 1
            if self._running == 0:
                sys.argv = self._runner


_ARGV = _ScriptArgv()


class ApplicationStarter:
    """Runs ``spec.application`` (see the module docstring)."""

    sink_needs_query = True

    def __init__(self, job: StreamJob, start_timeout: float = START_TIMEOUT) -> None:
        app = job.spec.application
        assert app is not None
        self.job = job
        self.app: Application = app
        self.label = app.label
        self.start_timeout = start_timeout
        self._run: _Run | None = None
        self._failure: str | None = None
        if app.script is not None and not Path(app.script).is_file():
            raise ApplicationError(app.script, "no such script file")

    def stateful_operators(self) -> list[str] | None:
        return None

    def failure(self) -> str | None:
        """An error of the user's code after its query started (a second query, a crash
        after the first ``start()``); None while all is well."""
        return self._failure

    def start(self, spark: SparkSession, *, once: bool = False,
              max_records_per_batch: int | None = None) -> StreamingQuery:
        """Run the user's code until its streaming query starts; return that query.
        ``max_records_per_batch``: set on the script's reader (its own cap, if lower, stays)."""
        install_hooks()
        run = _Run(once=once, max_records_per_batch=max_records_per_batch)
        self._run = run
        if self.app.script is not None:
            thread = threading.Thread(target=self._run_script, args=(run,), daemon=True,
                                      name=f"script:{Path(self.app.script).name}")
            thread.start()
            deadline = time.monotonic() + self.start_timeout
            while not run.started.is_set() and not run.ended.is_set():
                if time.monotonic() > deadline:
                    raise ApplicationError(
                        self.app.script, f"started no streaming query in {self.start_timeout:.0f}"
                        " s (the runner waits for the script's writeStream...start())")
                run.started.wait(0.1)
        else:
            self._call_module(spark, run)
        if run.query is None:
            raise run.error or ApplicationError(
                self.label, "ended without starting a streaming query (a batch job, or "
                "spark.readStream ... .start() never reached)")
        return run.query

    # the user's code runs with the hooks bound to this starter on its own thread only

    def _run_script(self, run: _Run) -> None:
        script = str(self.app.script)
        BOUND.starter, BOUND.run = self, run
        try:
            _ARGV.enter([script, *self.app.args])
            sys.path.insert(0, str(Path(script).resolve().parent))
            runpy.run_path(script, run_name="__main__")
        except SystemExit as e:
            if e.code not in (0, None):
                self._fail(run, ApplicationError(
                    _where(script, e), f"exited with status {e.code}"))
        except ApplicationError as e:
            self._fail(run, e)
        except BaseException as e:  # the user's code: anything may come out
            self._fail(run, ApplicationError(_where(script, e), _first_line(e)))
        finally:
            _ARGV.leave()
            with contextlib.suppress(ValueError):
                sys.path.remove(str(Path(script).resolve().parent))
            BOUND.starter = BOUND.run = None
            run.ended.set()

    def _call_module(self, spark: SparkSession, run: _Run) -> None:
        from pyspark.sql import DataFrame
        from pyspark.sql.streaming.query import StreamingQuery
        from pyspark.sql.streaming.readwriter import DataStreamWriter

        target = str(self.app.module)
        mod_name, func_name = target.split(":", 1)
        BOUND.starter, BOUND.run = self, run
        try:
            try:
                func: Callable[..., Any] = getattr(importlib.import_module(mod_name), func_name)
            except (ImportError, AttributeError) as e:
                raise ApplicationError(target, f"cannot import: {_first_line(e)}") from None
            result = func(spark, dict(self.app.options))
            if isinstance(result, DataFrame):
                if not result.isStreaming:
                    raise ApplicationError(target, "returned a batch DataFrame; the runner "
                                                   "scales streaming queries (spark.readStream)")
                sink = self.job.spec.sink
                if sink is None:
                    raise ApplicationError(target, "returned a DataFrame but the job has no "
                                                   "spec.sink to write it to (or return "
                                                   "df.writeStream...)")
                from operators.query.sinks import sink_writer

                result = sink_writer(result, sink, query_name=self.job.metadata.name)
            if isinstance(result, DataStreamWriter):
                result = result.start()
            if not isinstance(result, StreamingQuery):
                raise ApplicationError(target, f"returned {type(result).__name__}; return a "
                                               "streaming DataFrame, a DataStreamWriter or a "
                                               "started query")
        except ApplicationError as e:
            run.error = e
        except Exception as e:  # the user's code
            run.error = ApplicationError(_where(None, e) or target, _first_line(e))
        finally:
            BOUND.starter = BOUND.run = None
            run.ended.set()

    def _fail(self, run: _Run, error: ApplicationError) -> None:
        if run.query is None:
            run.error = error
        elif run is self._run and run.query.isActive:
            # while its query runs (a second start(), a crash beside it): the runner's watch
            # stops the query at a batch boundary and fails the job with this
            self._failure = str(error)
            log.error("application failed", application=self.label, error=str(error))
        else:  # after the runner stopped its query (a repartition, a scale-in, a stop)
            log.warning("the application raised after its query stopped; ignored",
                        application=self.label, error=str(error))

    # called from the hooks, on the user's thread

    def on_start(self, writer: Any, call: Callable[[], StreamingQuery]) -> StreamingQuery:
        run = BOUND.run
        assert isinstance(run, _Run)  # this starter bound it (run_once / run_forever)
        where = _caller(self.app.script) or self.label
        if run.query is not None:
            raise ApplicationError(where, "starts a second streaming query; the runner scales "
                                          "one query per job (run each query as its own job)")
        recorded: dict[str, str] = writer.__dict__.setdefault("_sa_options", {})
        self._place_checkpoint(recorded, where)
        writer.option("checkpointLocation", self.job.spec.checkpoint.location)
        if not writer.__dict__.get("_sa_named"):
            writer.queryName(self.job.metadata.name)
        kind = writer.__dict__.get("_sa_trigger")
        if kind == "continuous":
            raise ApplicationError(where, "uses a continuous trigger; the runner scales "
                                          "micro-batch queries")
        if run.once:
            writer.trigger(once=True)
        else:  # the job's trigger: batch time is judged against it (spec.trigger)
            seconds = self.job.spec.trigger.interval_seconds
            if kind is not None:
                log.info("the job's trigger replaces the script's", script=kind,
                         job_seconds=seconds)
            writer.trigger(processingTime=f"{round(seconds * 1000)} milliseconds")
        query = call()
        run.query = query
        log.info("application started its query", application=self.label, at=where,
                 query=str(query.id), checkpoint=self.job.spec.checkpoint.location)
        run.started.set()
        return query

    def _place_checkpoint(self, recorded: dict[str, str], where: str) -> None:
        """The job's checkpoint replaces the script's own; refuse when that would silently
        drop the state the script's own checkpoint already holds."""
        from operators import state

        ours = self.job.spec.checkpoint.location
        theirs = recorded.get("checkpointlocation")
        if not theirs or os.path.abspath(theirs) == os.path.abspath(ours):
            return
        held = False
        with contextlib.suppress(Exception):  # unreadable: nothing there we could keep
            held = (state.inspect(theirs).last_committed_batch is not None
                    and state.inspect(ours).last_committed_batch is None)
        if held:
            raise ApplicationError(where, (
                f"the script's own checkpoint {theirs} holds committed batches and the "
                f"job's checkpoint {ours} is empty: point spec.checkpoint.location (runner "
                f"--checkpoint) at {theirs} to resume it, or move it away"))
        log.warning("the job's checkpoint replaces the script's", script=theirs, job=ours)


# --- where in the user's code ----------------------------------------------------------------


def _frames(e: BaseException | None = None) -> list[traceback.FrameSummary]:
    if e is not None:
        return list(traceback.extract_tb(e.__traceback__))
    return list(traceback.extract_stack())


def _where(script: str | None, e: BaseException) -> str:
    """``file:line`` of the deepest frame of the user's code in ``e``'s traceback."""
    frames = _frames(e)
    if script is not None:
        target = os.path.abspath(script)
        mine = [f for f in frames if os.path.abspath(f.filename) == target]
        if mine:
            return f"{script}:{mine[-1].lineno}"
        return script
    user = [f for f in frames if "pyspark" not in f.filename and "/operators/" not in f.filename]
    return f"{user[-1].filename}:{user[-1].lineno}" if user else ""


def _caller(script: str | None) -> str | None:
    """``script:line`` of the current call inside the script (for the start hook)."""
    if script is None:
        return None
    target = os.path.abspath(script)
    mine = [f for f in _frames() if os.path.abspath(f.filename) == target]
    return f"{script}:{mine[-1].lineno}" if mine else None


def _first_line(e: BaseException | str) -> str:
    text = first_line(e)
    if isinstance(e, BaseException) and not text.startswith(type(e).__name__):
        return f"{type(e).__name__}: {text}"
    return text
