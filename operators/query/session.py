"""The SparkSession of a runner, and the executors it holds.

Usage::

    spark = create_session(spec, SessionOptions(master=cluster.master_url, max_executors=3))
    pool = ExecutorPool(spark, cores=spec.executors.cores)
    pool.settle(spec.executors.initial)          # the start count the manifest asks for
    pool.set_target(3)                           # grow in place: requestTotalExecutors
    pool.set_target(1)                           # shrink: killExecutors(least state first)

Executor counts follow Spark standalone as measured (docs/spark-facts.md and docs/runner.md):
dynamic allocation is off, so the master grants ``spark.cores.max / spark.executor.cores``
executors at registration whatever ``spark.executor.instances`` says. ``cores.max`` is therefore
the *ceiling* (``max_executors``), and :meth:`ExecutorPool.settle` brings the start count down
to ``initial`` (kill the surplus, then an absolute ``requestTotalExecutors``). Growth is an
absolute ``requestTotalExecutors(n)``; the relative ``requestExecutors(k)`` drifts from the live
count and is never used. Lowering the target alone kills nothing, so shrinking kills executors.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from contracts.ports import free_port
from contracts.streamjob import StreamJobSpec
from operators.jvm import jvm
from operators.query.cluster import (
    INSTALL_JVM_ARCHIVE,
    jvm_archive,
    jvm_archive_flag,
    spark_env,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

PROJECT_ROOT = str(Path(__file__).resolve().parent.parent)


@dataclass(frozen=True)
class SessionOptions:
    """How to build the session around a spec."""

    master: str | None = None
    """Spark master URL; overrides ``spec.spark.master``."""
    max_executors: int | None = None
    """Ceiling for in-place growth (sets ``spark.cores.max``); None = ``initial``."""
    app_name: str = "stream-autoscaler"
    ui_port: int | None = None
    """Driver web UI port (the per-operator metrics come from its REST API); None = free."""
    extra_conf: dict[str, str] = field(default_factory=dict)


def session_conf(spec: StreamJobSpec, options: SessionOptions) -> dict[str, str]:
    """Every Spark setting the runner sets, job settings included (later keys win)."""
    from operators.query.job import spark_conf_for

    cores = spec.executors.cores
    ceiling = max(options.max_executors or 0, spec.executors.initial, 1)
    conf = {
        "spark.app.name": options.app_name,
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.ui.port": str(options.ui_port or free_port()),
        "spark.ui.showConsoleProgress": "false",
        # Executors follow our requests, not Spark's task-backlog heuristic (docs/spark-facts.md).
        "spark.dynamicAllocation.enabled": "false",
        "spark.executor.cores": str(cores),
        "spark.executor.memory": spec.executors.memory,
        "spark.cores.max": str(ceiling * cores),
        "spark.pyspark.python": sys.executable,
        "spark.executorEnv.PYTHONPATH": PROJECT_ROOT,
        # Keep enough SQL executions for the per-operator poller to find the latest batches.
        "spark.sql.ui.retainedExecutions": "60",
        "spark.ui.retainedJobs": "200",
        "spark.ui.retainedStages": "200",
    }
    conf.update(jvm_archive_conf())
    conf.update(spark_conf_for(spec))
    conf.update(options.extra_conf)
    jars = kafka_jars_for(spec) + s3a_jars_for(spec)
    if jars:
        conf["spark.jars"] = ",".join(j for j in (conf.get("spark.jars"), *jars) if j)
    return conf


JVM_ARCHIVE_KEYS = ("spark.driver.defaultJavaOptions", "spark.executor.defaultJavaOptions")
"""Where the archive's flag goes: Spark prepends these to the ``extraJavaOptions`` a job may set
(its own JVM flags stay its own), and a StreamJob cannot set them (contracts/spark.py)."""


def jvm_archive_conf(environ: Mapping[str, str] | None = None,
                     installed: Path = INSTALL_JVM_ARCHIVE) -> dict[str, str]:
    """The driver's and executors' JVMs map the class archive
    (:func:`~operators.query.cluster.jvm_archive`: the image's in a pod, this install's in a local
    run) where one is there: they then skip reading, parsing and verifying those classes from the
    jars at each start (a driver's session, an executor's registration, each restart's new
    executors; the figures: docs/benchmark.md, "Pods start on the image's class archive" and
    "Local runs start on the install's class archive"). Spark's standalone workers and
    Kubernetes executors both take ``spark.executor.defaultJavaOptions``
    (tests/unit/operators/query/test_session_env.py; on a real pod:
    tests/integration/node/test_node.py::test_executor_env_starts_sparks_executor_backend)."""
    archive = jvm_archive(environ, installed)
    if archive is None:
        return {}
    return {key: jvm_archive_flag(archive) for key in JVM_ARCHIVE_KEYS}


def kafka_jars_for(spec: StreamJobSpec) -> list[str]:
    """Spark's Kafka connector jars (local paths, cached by hack/tools/kafka/resolve.sh) when
    the job reads or writes Kafka; else []. Raises ValueError naming the missing jars."""
    from operators.sources.kafka import kafka_jars
    from operators.sources.registry import uses_kafka

    if spec.application is not None:
        # The user's code may read or write Kafka; we cannot know before it runs. The
        # connector is on the classpath when it is installed (the image, hack/tools/kafka),
        # as it is for spark-submit --packages; other jars: spec.spark.conf spark.jars.
        try:
            return kafka_jars()
        except ValueError:
            return []
    if not uses_kafka(spec):
        return []
    return kafka_jars()


def s3a_jars_for(spec: StreamJobSpec) -> list[str]:
    """hadoop-aws and the AWS SDK jars (the image's, or the cache hack/tools/s3a/resolve.sh
    fills) when the checkpoint is on ``s3a://``; else []. Raises ValueError naming the missing
    jars: without them Spark fails on the first batch with "No FileSystem for scheme s3a"."""
    from operators.s3a import s3a_jars
    from operators.state.store import is_object_store

    return s3a_jars() if is_object_store(spec.checkpoint.location) else []


LOOPBACK_ENV = ("SPARK_LOCAL_IP", "SPARK_LOCAL_HOSTNAME")
"""What :func:`operators.query.cluster.spark_env` sets to keep a mini-cluster on loopback."""


def session_env(master: str) -> dict[str, str]:
    """The environment the driver JVM starts with: Spark's and Python's variables from
    :func:`operators.query.cluster.spark_env`. On Kubernetes (a driver pod) without the loopback
    pins: the pod's address is the one executors and the controller reach, and pinning Spark
    to loopback made its UI (whose REST API the runner reads) listen on 127.0.0.1 only, behind
    a URL naming the driver's Service."""
    env = {k: v for k, v in spark_env().items()
           if k.startswith(("SPARK_", "PYSPARK_")) or k == "PYTHONPATH"}
    if master.startswith("k8s://"):
        for key in LOOPBACK_ENV:
            env.pop(key, None)
    return env


def create_session(spec: StreamJobSpec, options: SessionOptions) -> SparkSession:
    """A SparkSession for ``spec`` on ``options.master`` (or ``spec.spark.master``)."""
    master = options.master or spec.spark.master
    if not master:
        raise ValueError("no Spark master: pass one or start a mini-cluster")
    for key in LOOPBACK_ENV:
        os.environ.pop(key, None)
    os.environ.update(session_env(master))
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(master)
    for key, value in session_conf(spec, options).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark


@dataclass(frozen=True)
class ExecutorInfo:
    """One live executor as the driver's REST API reports it."""

    id: str
    host_port: str
    cores: int
    active_tasks: int
    total_tasks: int
    memory_used: int
    added_time: str = ""


class ExecutorPool:
    """The executors of one SparkContext: list, grow (absolute target), shrink (kill)."""

    def __init__(self, spark: SparkSession, cores: int) -> None:
        self.spark = spark
        self.cores = cores
        sc = spark.sparkContext
        self._jsc = sc._jsc.sc()
        self._jvm = jvm(spark)
        self.app_id = sc.applicationId
        self.ui_url = (sc.uiWebUrl or "").rstrip("/")
        self.target: int | None = None
        self.warmed: set[str] = set()
        """Executors that have run the job or its warm-up (:mod:`operators.query.warmup`):
        a start's executors (its first batch warms them) and those a warm-up reached."""
        self.warm_tried: set[str] = set()
        """Executors a warm-up was run for, whatever came of it: a restart warms only the
        others (one that failed would fail again, and only costs time)."""

    # --- reading ----------------------------------------------------------------------------

    def rest(self, path: str, timeout: float = 20.0, attempts: int = 3) -> Any:
        """GET ``/api/v1/applications/<app>/<path>`` from the driver UI, parsed JSON.

        The UI answers in ~60 ms, but seconds when the driver is busy (start-up, a loaded
        machine): retried, then the OSError propagates.
        """
        url = f"{self.ui_url}/api/v1/applications/{self.app_id}/{path}"
        for attempt in range(attempts):
            try:
                with urllib.request.urlopen(url, timeout=timeout) as r:
                    return json.loads(r.read())
            except OSError:
                if attempt == attempts - 1:
                    raise
                time.sleep(1.0)
        raise AssertionError("unreachable")

    def live(self) -> list[ExecutorInfo]:
        """Active executors (the driver excluded), oldest first."""
        rows = self.rest("executors")
        out = [
            ExecutorInfo(
                id=str(e["id"]),
                host_port=e.get("hostPort", ""),
                cores=int(e.get("totalCores", 0)),
                active_tasks=int(e.get("activeTasks", 0)),
                total_tasks=int(e.get("totalTasks", 0)),
                memory_used=int(e.get("memoryUsed", 0)),
                added_time=str(e.get("addTime", "")),
            )
            for e in rows
            if e.get("id") != "driver" and e.get("isActive", True)
        ]
        return sorted(out, key=lambda e: _id_key(e.id))

    def live_count(self) -> int:
        """Executors registered with the driver (from the block manager view: no HTTP)."""
        return max(0, int(self._jsc.getExecutorMemoryStatus().size()) - 1)

    # --- changing ---------------------------------------------------------------------------

    def request_total(self, n: int) -> bool:
        """Absolute target (``requestTotalExecutors``): the master grows the app up to ``n``."""
        empty = getattr(self._jvm.scala.collection.immutable, "Map$").__getattr__("MODULE$").empty()
        self.target = n
        return bool(self._jsc.requestTotalExecutors(int(n), 0, empty))

    def kill(self, ids: list[str]) -> None:
        """Kill executors by id; then re-assert the absolute target (kill lowers it by one each)."""
        for executor_id in ids:
            self._jsc.killExecutor(executor_id)
        if self.target is not None:
            self.request_total(self.target)

    def set_target(self, n: int, state_weight: dict[str, float] | None = None) -> list[str]:
        """Make the target ``n``; kill the surplus, least state first. Returns killed ids.

        ``state_weight`` maps executor id to how much state it holds (see
        :func:`operators.driver.exporter.state_weight_by_executor`); without it the newest
        executors go.
        """
        self.target = n
        live = self.live()
        surplus = len(live) - n
        victims: list[str] = []
        if surplus > 0:
            victims = choose_victims(live, surplus, state_weight or {})
            self.kill(victims)
        else:
            self.request_total(n)
        return victims

    def settle(self, initial: int, timeout: float = 30.0,
               without_room: Callable[[], int] | None = None) -> list[str]:
        """Bring the start-up grant (``cores.max / executor.cores``) down to ``initial``.

        Waits until the executors the master granted at registration have registered (the count
        stops changing for 2 s, or reaches the ceiling), then kills the surplus and waits for
        ``initial``. ``without_room`` (on Kubernetes) counts the executor pods the scheduler has
        no node with room for: those are not waited for. Spark keeps them asked for and they
        join once a node has room, but a start that waited for them spent both timeouts, a
        minute, before its query (a recovery onto the one worker a lost node left, with room
        for 2 of its 4 executors: ``tests/unit/operators/query/test_settle.py``).
        """
        self.request_total(initial)
        ceiling = int(self.spark.conf.get("spark.cores.max", "0") or 0) // max(self.cores, 1)
        room = _Throttled(without_room)
        deadline = time.monotonic() + timeout
        last, stable_since = -1, time.monotonic()
        while time.monotonic() < deadline:
            count = self.live_count()
            if count != last:
                last, stable_since = count, time.monotonic()
            if count >= max(ceiling, initial) or (
                count >= initial - room() and time.monotonic() - stable_since >= 2.0
            ):
                break
            time.sleep(0.25)
        killed = self.set_target(initial)
        self.wait_for(initial, timeout, room)
        return killed

    def wait_for(self, n: int, timeout: float,
                 without_room: Callable[[], int] | None = None) -> bool:
        """Wait until exactly ``n`` executors are live, or, where ``without_room`` counts
        executors no node has room for, all but those (and no more than ``n``)."""
        deadline = time.monotonic() + timeout
        while True:
            count = self.live_count()
            if count == n or (without_room is not None and n - without_room() <= count <= n):
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.25)


class _Throttled:
    """A count asked of the API server at most once a second (0 without a source)."""

    def __init__(self, source: Callable[[], int] | None, every: float = 1.0) -> None:
        self._source, self._every = source, every
        self._at, self._value = -math.inf, 0

    def __call__(self) -> int:
        if self._source is None:
            return 0
        now = time.monotonic()
        if now - self._at >= self._every:
            self._at, self._value = now, self._source()
        return self._value


def choose_victims(live: list[ExecutorInfo], k: int, state_weight: dict[str, float]) -> list[str]:
    """The ``k`` executors whose loss costs least: least state first, then fewest running
    tasks, then newest (a late joiner has loaded the least state and the coldest caches)."""
    ranked = sorted(
        live,
        key=lambda e: (state_weight.get(e.id, 0.0), e.active_tasks, -_id_key(e.id)),
    )
    return [e.id for e in ranked[:k]]


def _id_key(executor_id: str) -> int:
    try:
        return int(executor_id)
    except ValueError:
        return sys.maxsize
