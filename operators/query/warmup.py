"""Executors warmed while the query still runs, before a restart puts its first batch on them.

A restart that spreads state over executors that joined in place (a re-spread, a repartition)
runs its first batch on JVMs that have never run the job: each of them then starts its Python
workers (the source's reads wait for them), loads the classes of Spark SQL, the shuffle and the
state store, loads RocksDB's native library and interprets everything the JIT has not yet
compiled, all under the executor's CPU quota and all while the job commits nothing: at half a
core, most of such a batch is waiting for the new executors' Python workers and their first
stateful tasks, where the executor that had run the job takes about a second for the same
(docs/benchmark.md, "Restarts: executors warmed before the stop").

:func:`warm` pays those costs on the new executors while the old query keeps committing:

* a Python job (one task per slot, and more) whose tasks import the modules the job's Python
  workers use: PySpark's worker, pyarrow and the source's module. Python workers are reused
  (``spark.python.worker.reuse``, on by default), so the worker that later reads the source is
  one that has imported them. Spark keeps one pool of workers per environment, and its SQL
  runners add to theirs what its RDD runner does not (``SPARK_SIMPLIFIED_TRACEBACK``, from the
  session's settings): so the job is an Arrow map over the job's own session, the runner a
  Python source's reads use (``mapInArrow``), never an RDD's ``mapPartitions``, whose workers
  no read ever reuses (tests/integration/spark_runtime/test_warmup_workers.py);
* a one-batch stateful query on a session of its own (``newSession``: the job's session
  settings are untouched): a ``rate-micro-batch`` source counted per key into the state store
  the job uses and Spark's ``noop`` sink, on a throwaway checkpoint: the state store's classes
  and native library, the shuffle, code generation and their JIT.

Neither can name the executors its tasks run on (Spark has no such API for Python); idle
executors take tasks first, so both run again, at most :data:`WARM_ROUNDS` times, until every
executor asked for has run tasks of each (read from the driver's REST API by job group or
query name). What no warm-up reaches is said in the result: an executor still cold after the
rounds, or a warm-up that failed (a warm-up never fails the action: it only saves time).
(tests/unit/operators/query/test_warmup.py; on real Spark,
tests/integration/spark_runtime/test_runner.py::test_scale_and_repartition_through_the_endpoint)
"""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import structlog

from operators.errors import first_line
from operators.query.job import CHECKPOINT_MANAGER_KEY

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import SparkSession

log = structlog.get_logger("operators.query.warmup")

WARM_ROUNDS = 3
"""Rounds of both warm-ups at most: a round whose tasks all went to other executors (those
busy with the running query's tasks are not idle, so rarely) is run again."""
TASKS_PER_SLOT = 4
"""Tasks of each warm-up per slot of the executors warmed: enough that a slot busy with one of
the query's tasks when the warm-up starts still finds some when it frees up."""
PYTHON_TASK_SECONDS = 0.3
"""Each Python warm-up task lasts at least this: an executor that is warm already (a free slot
of the one that ran the job) cannot run them all before the new ones take theirs."""
ROWS_PER_SLOT = 2_000
"""Rows of the stateful warm-up per slot: enough to generate and run the aggregation's code,
little enough to cost well under a second."""
REST_SETTLE_SECONDS = 10.0
"""How long the driver's REST API may take to show a finished warm-up job as ended (its task
ends are then all in): Spark's status store follows the listener bus, after the job returns."""
QUERY_TIMEOUT_SECONDS = 60.0
"""The stateful warm-up's batch gives up after this (the warm-up is then reported failed)."""
JOB_GROUP_PROPERTIES = ("spark.jobGroup.id", "spark.job.description",
                        "spark.job.interruptOnCancel")
"""What ``setJobGroup`` sets on the calling thread, cleared after the Python warm-up."""
OUT_OF_TIME = "out of time before the restart"
"""The error of a warm-up its deadline (a restart's budget) cut short."""
BASE_MODULES = ("pyspark.worker", "pyspark.sql.types", "pyarrow")
"""What every job's Python workers import: PySpark's worker and Arrow (the Python data sources
hand their rows over as Arrow batches)."""


@dataclass
class WarmResult:
    """What a warm-up did: the executors it warmed, those it could not, and why."""

    asked: list[str]
    python: set[str] = field(default_factory=set)
    """Executors that ran a task of the Python warm-up."""
    stateful: set[str] = field(default_factory=set)
    """Executors that ran a task of the stateful warm-up."""
    rounds: int = 0
    seconds: float = 0.0
    python_seconds: float = 0.0
    stateful_seconds: float = 0.0
    waited_seconds: float = 0.0
    """Spent waiting for a warm-up already running (a scale-out's) before this one."""
    error: str | None = None

    @property
    def warmed(self) -> list[str]:
        """Executors that ran both warm-ups."""
        return [e for e in self.asked if e in self.python and e in self.stateful]

    @property
    def cold(self) -> list[str]:
        return [e for e in self.asked if e not in self.python or e not in self.stateful]

    def to_wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {"warmed": self.warmed, "rounds": self.rounds,
                               "seconds": round(self.seconds, 2)}
        if self.python_seconds or self.stateful_seconds:
            out["python_seconds"] = round(self.python_seconds, 2)
            out["stateful_seconds"] = round(self.stateful_seconds, 2)
        if round(self.waited_seconds, 2):
            out["waited_seconds"] = round(self.waited_seconds, 2)
        if self.cold:
            out["cold"] = self.cold
        if self.error:
            out["error"] = self.error
        return out


def python_warmup(modules: tuple[str, ...], min_seconds: float = PYTHON_TASK_SECONDS
                  ) -> Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The Python warm-up task (``mapInArrow``'s function): import ``modules`` (a missing one is
    skipped: the job's own workers would fail on it with their own error) in the executor's
    reused worker, last at least ``min_seconds``, and yield the count of its rows."""

    def task(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import contextlib
        import importlib
        import time as clock

        import pyarrow

        start = clock.monotonic()
        for name in modules:
            with contextlib.suppress(ImportError):
                importlib.import_module(name)
        count = sum(batch.num_rows for batch in batches)
        clock.sleep(max(0.0, min_seconds - (clock.monotonic() - start)))
        yield pyarrow.RecordBatch.from_pydict({"rows": [count]})

    return task


def run_python(spark: SparkSession, tasks: int, modules: tuple[str, ...],
               min_seconds: float = PYTHON_TASK_SECONDS) -> int:
    """Run the Python warm-up as ``tasks`` tasks on ``spark`` (the job's session: its workers'
    environment is the one the job's reads run in); the rows it counted."""
    rows = (spark.range(0, tasks * 10, 1, tasks)
            .mapInArrow(python_warmup(modules, min_seconds), "rows long").collect())
    return sum(int(r["rows"]) for r in rows)


def warm(spark: SparkSession, rest: Callable[[str], Any], executor_ids: list[str],
         cores: int, modules: tuple[str, ...] = (), state_provider: str | None = None,
         deadline: float | None = None) -> WarmResult:
    """Warm ``executor_ids`` (live executors of ``spark``) with the Python and the stateful
    warm-up, each repeated until every one of them has run its tasks; never raises.

    ``rest`` reads the driver's REST API (``ExecutorPool.rest``), ``cores`` is each executor's
    slots, ``modules`` the job's own Python modules (its source's), ``state_provider`` the
    state store class the job uses (None: the session's). ``deadline`` (``time.monotonic()``)
    bounds a warm-up a restart waits for: no part starts after it, the stateful batch gives up
    at it, and what stayed cold is said (tests/unit/operators/query/test_warmup.py)."""
    result = WarmResult(asked=list(executor_ids))
    if not executor_ids:
        return result
    if out_of_time(deadline):
        result.error = "no time left before the restart"
        return result
    start = time.monotonic()
    tasks = max(1, TASKS_PER_SLOT * cores * len(executor_ids))
    group = f"stream-autoscaler-warmup-{uuid.uuid4().hex[:8]}"
    work = tempfile.mkdtemp(prefix="stream-autoscaler-warmup-")
    sc = spark.sparkContext
    modules = tuple(dict.fromkeys((*BASE_MODULES, *modules)))
    try:
        warm_session = spark.newSession()
        warm_session.conf.set("spark.sql.shuffle.partitions", str(tasks))
        if state_provider:
            warm_session.conf.set("spark.sql.streaming.stateStore.providerClass", state_provider)
        # the throwaway checkpoint is a local directory: the object stores' checkpoint file
        # manager (an s3a:// job's, in the session's settings) refuses a file system without
        # abortable streams
        warm_session.conf.unset(CHECKPOINT_MANAGER_KEY)
        for round_ in range(1, WARM_ROUNDS + 1):
            if out_of_time(deadline):
                result.error = OUT_OF_TIME
                break
            live = {str(e["id"]) for e in rest("executors") if e.get("isActive", True)}
            gone = [e for e in executor_ids if e not in live]
            if gone:  # killed since (a scale-in): nothing to warm there
                result.asked = executor_ids = [e for e in executor_ids if e in live]
            if not executor_ids:
                break
            result.rounds = round_
            if not set(executor_ids) <= result.python:
                part = time.monotonic()
                sc.setJobGroup(f"{group}-{round_}", "stream-autoscaler: executors warmed",
                               interruptOnCancel=True)
                # past the deadline the job is cancelled (its collect then raises: said below)
                cancel = None if deadline is None else threading.Timer(
                    max(0.0, deadline - part), sc.cancelJobGroup, args=(f"{group}-{round_}",))
                if cancel is not None:
                    cancel.daemon = True
                    cancel.start()
                try:
                    run_python(spark, tasks, modules)
                finally:  # the thread's later jobs (a repartition's) are not the warm-up's
                    if cancel is not None:
                        cancel.cancel()
                    for key in JOB_GROUP_PROPERTIES:
                        sc.setLocalProperty(key, None)  # type: ignore[arg-type]
                result.python |= executors_of(rest, in_group(f"{group}-{round_}"),
                                              settle_for(deadline))
                result.python_seconds += time.monotonic() - part
            if not set(executor_ids) <= result.stateful:
                if out_of_time(deadline):
                    result.error = OUT_OF_TIME
                    break
                part = time.monotonic()
                name = f"{group}-state-{round_}"
                timeout = QUERY_TIMEOUT_SECONDS if deadline is None else max(
                    1.0, min(QUERY_TIMEOUT_SECONDS, deadline - part))
                run_stateful(warm_session, name, f"{work}/checkpoint", tasks, timeout)
                result.stateful |= executors_of(rest, of_query(name), settle_for(deadline))
                result.stateful_seconds += time.monotonic() - part
            if not result.cold:
                break
    except Exception as e:  # a warm-up only saves time: the action goes on, cold
        result.error = first_line(e)
        log.warning("executors not warmed", error=result.error, executors=executor_ids)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        result.seconds = time.monotonic() - start
    log.info("executors warmed", **result.to_wire())
    return result


def out_of_time(deadline: float | None) -> bool:
    """Whether ``deadline`` (``time.monotonic()``; None: none) has passed."""
    return deadline is not None and time.monotonic() >= deadline


def settle_for(deadline: float | None) -> float:
    """The REST view's settle wait, within ``deadline``."""
    if deadline is None:
        return REST_SETTLE_SECONDS
    return max(0.0, min(REST_SETTLE_SECONDS, deadline - time.monotonic()))


def run_stateful(session: SparkSession, name: str, checkpoint: str, partitions: int,
                 timeout: float = QUERY_TIMEOUT_SECONDS) -> None:
    """One batch of a keyed count on the state store into ``noop``; raises if it fails or
    outlasts ``timeout`` seconds."""
    from pyspark.sql import functions as F

    df = (session.readStream.format("rate-micro-batch")
          .option("rowsPerBatch", ROWS_PER_SLOT * partitions)
          .option("numPartitions", partitions).load())
    counts = df.groupBy((F.col("value") % (ROWS_PER_SLOT * partitions)).alias("k")).count()
    query = (counts.writeStream.queryName(name).format("noop").outputMode("update")
             .option("checkpointLocation", checkpoint).trigger(once=True).start())
    try:
        if not query.awaitTermination(timeout):  # type: ignore[arg-type]
            raise TimeoutError(f"the stateful warm-up did not finish in {timeout:g} s")
        error = query.exception()
        if error is not None:
            raise RuntimeError(f"the stateful warm-up failed: {first_line(error)}")
    finally:
        if query.isActive:
            query.stop()


def in_group(group: str) -> Callable[[dict[str, Any]], bool]:
    """The jobs of a job group (the Python warm-up's)."""
    return lambda job: job.get("jobGroup") == group


def of_query(name: str) -> Callable[[dict[str, Any]], bool]:
    """The jobs of a named streaming query (Spark puts the name in each job's description)."""
    return lambda job: name in (job.get("description") or "")


def executors_of(rest: Callable[[str], Any], job_filter: Callable[[dict[str, Any]], bool],
                 settle_seconds: float = REST_SETTLE_SECONDS) -> set[str]:
    """Executors that ran a task of the jobs ``job_filter`` picks (the driver's REST API), once
    the API shows each of them ended (or after ``settle_seconds``, with what it shows then): a
    job that has returned may still be running there, some of its tasks not yet listed."""
    deadline = time.monotonic() + settle_seconds
    while True:
        jobs = [job for job in rest("jobs") if job_filter(job)]
        if (jobs and all(job.get("status") not in ("RUNNING", "UNKNOWN") for job in jobs)) or (
                time.monotonic() >= deadline):
            break
        time.sleep(0.2)
    out: set[str] = set()
    for job in jobs:
        for stage in job.get("stageIds", []):
            for attempt in rest(f"stages/{stage}") or []:
                tasks = rest(f"stages/{stage}/{attempt.get('attemptId', 0)}/taskList"
                             "?length=10000")
                out |= {str(t["executorId"]) for t in tasks if t.get("executorId")}
    return out
