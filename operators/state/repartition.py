"""Repartition a stopped query's state from its checkpoint, with rollback (the SEEP move).

Usage (the query must be stopped; a batch it left in flight is refused, or skipped with
``skip_uncommitted`` where no reader saw what it wrote)::

    result = repartition(spark, "/data/cp", 8)
    result.partitions_before, result.partitions_after, result.seconds

Spark's offline repartition (``spark._streamingCheckpointManager.repartition``, PySpark 4.2+,
RocksDB only) writes batch N+1 (same offsets, new ``spark.sql.shuffle.partitions``) and the new
state. We check the new count in ``offsets/N+1`` and that the state row total did not change:
the new state is read back with Spark (it loads, and holds the rows), the old one's total is
the store's own count in its checkpoint files where they say it (:func:`committed_keys`: the
running query has just committed and read that state), else read too. Where the store's count
and the rows read back differ, the old state is read as well before the move is called failed.
If any step fails, every file the attempt created is removed and every small metadata file it
changed is put back (an uncommitted ``offsets/N+1`` alone makes the next start fail with
``STREAMING_UNFINISHED_REPARTITION_DETECTED``), so the query resumes on the old count.

Spark's own file sink (``format("parquet").option("path", ...)``) keeps a log of the files each
batch committed (``<path>/_spark_metadata/<batch>``), and its readers require one entry per
batch: the repartition batch N+1 runs no sink, so without an entry the sink's output could no
longer be read (``_spark_metadata/N+1 doesn't exist``, measured on Spark 4.x). Given the sink's
path (:func:`file_sink_path` of the running query), the repartition adds the empty entry with
Spark's own ``FileStreamSinkLog`` (which also compacts when the batch is a compaction batch).

Fault injection for tests: ``STREAM_AUTOSCALER_FAULT=repartition-after-write`` fails the step
after Spark wrote the new batch; ``repartition-before-write`` fails before it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from contracts.runner_api import Step
from operators.errors import OperatorsError, first_line
from operators.jvm import gateway, jvm
from operators.state.checkpoint import (
    CheckpointError,
    CheckpointInfo,
    inspect,
    partitions_of,
    store_of,
)
from operators.state.rows import committed_keys, state_rows
from operators.state.store import CheckpointStore
from operators.steps import timed

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

FAULT_ENV = "STREAM_AUTOSCALER_FAULT"
_SMALL = 1 << 20  # metadata files are kilobytes; state data is never copied


class RepartitionError(OperatorsError, RuntimeError):
    """A repartition that failed and was rolled back. ``step`` names where it failed."""

    def __init__(self, step: str, detail: str, rolled_back: bool) -> None:
        state = "rolled back" if rolled_back else "ROLLBACK FAILED"
        super().__init__(f"repartition failed at {step}: {detail} ({state})")
        self.step = step
        self.detail = detail
        self.rolled_back = rolled_back


@dataclass(frozen=True)
class RepartitionResult:
    """What a repartition did and how long it took."""

    partitions_before: int
    partitions_after: int
    batch: int
    """The batch Spark wrote for the repartition (last committed + 1)."""
    rows_before: int | None
    rows_after: int | None
    seconds: float
    rows_before_from: str | None = None
    """Where ``rows_before`` came from: ``"files"`` (the store's own count in its checkpoint
    files, :func:`committed_keys`), ``"scan"`` (the old state read with Spark: the files could
    not say, or their count differed from the rows read back) or None (no row check).
    tests/integration/spark_pipelines/test_state_counts.py holds "files" on a local
    checkpoint, tests/integration/s3/test_runner_s3a.py on S3."""


def file_sink_path(query: StreamingQuery) -> str | None:
    """The output path of a query writing to Spark's file sink (``FileSink[path]``), else
    None (foreachBatch, Kafka, memory, console, ...)."""
    try:
        desc = str(query._jsq.streamingQuery().sink().toString())
    except Exception:  # not a micro-batch query, or a Spark without these accessors
        return None
    if desc.startswith("FileSink[") and desc.endswith("]"):
        return desc[len("FileSink["):-1]
    return None


def _sink_log(spark: SparkSession, sink_path: str) -> Any:
    """Spark's ``FileStreamSinkLog`` of the file sink at ``sink_path``."""
    view = jvm(spark)
    sinks = view.org.apache.spark.sql.execution.streaming.sinks
    return sinks.FileStreamSinkLog(sinks.FileStreamSinkLog.VERSION(), spark._jsparkSession,
                                   f"{sink_path.rstrip('/')}/_spark_metadata",
                                   view.scala.Option.empty())


def _sink_latest(log: Any) -> int | None:
    latest = log.getLatestBatchId()
    return int(latest.get()) if latest.isDefined() else None


def sink_never_committed(spark: SparkSession, sink_path: str | None, batch: int) -> bool:
    """Whether ``batch`` may be skipped rather than run to its commit: the query writes
    Spark's file sink (``sink_path``) and the sink's log has no entry for ``batch``, so no
    reader sees anything the batch wrote (the log lists the files of committed batches only).
    Another sink (``foreachBatch``, Kafka, ...) cannot tell what an unfinished batch wrote:
    False."""
    if sink_path is None:
        return False
    latest = _sink_latest(_sink_log(spark, sink_path))
    return latest is None or latest < batch


def _record_sink_batch(spark: SparkSession, sink_path: str, batch: int) -> None:
    """An empty ``_spark_metadata`` entry for ``batch`` (a repartition's or a skipped one),
    with Spark's log."""
    view = jvm(spark)
    sinks = view.org.apache.spark.sql.execution.streaming.sinks
    log = _sink_log(spark, sink_path)
    latest = _sink_latest(log)
    if latest is not None and latest >= batch:
        return  # already there (a retried repartition)
    empty = gateway(spark).new_array(sinks.SinkFileStatus, 0)
    if not log.add(batch, empty):
        raise RuntimeError(f"the file sink's log {sink_path}/_spark_metadata refused batch {batch}")


def repartition(
    spark: SparkSession, location: str, partitions: int, *, check_rows: bool = True,
    file_sink: str | None = None, steps: dict[str, float] | None = None,
    skip_uncommitted: bool = False,
) -> RepartitionResult:
    """Repartition the state of a *stopped* query to ``partitions``; roll back on failure.

    ``steps`` receives the seconds of each :class:`contracts.runner_api.Step` (snapshot,
    count_rows, rewrite, verify), also when it fails.

    ``skip_uncommitted``: a batch the stop left in flight is skipped instead of refused (Spark
    commits it empty and the resumed query reads its records again, on the new layout): only
    where no reader sees what the batch wrote, so exactly once still holds: the caller checks
    (:func:`operators.query.sinks.forget_unfinished_batch`). Spark's file sink (``file_sink``)
    then gets an empty log entry for it, as for the repartition's batch.

    Raises ``ValueError`` for a request that cannot run (no committed batch, same count,
    ``partitions < 1``) without touching anything, :class:`RepartitionError` after a rollback.
    """
    if partitions < 1:
        raise ValueError("partitions must be >= 1")
    info = inspect(location)
    if info.last_committed_batch is None or info.partitions is None:
        raise ValueError(f"checkpoint {location} has no committed batch to repartition")
    skipped = info.uncommitted_batch if skip_uncommitted else None
    if info.uncommitted_batch is not None and skipped is None:
        raise ValueError(
            f"checkpoint {location} has an uncommitted batch {info.uncommitted_batch}: resume "
            "the query until it commits before repartitioning (or skip it, where no reader "
            "saw what it wrote: skip_uncommitted)"
        )
    if partitions == info.partitions:
        raise ValueError(f"state already has {partitions} partitions")
    cp = store_of(location)
    started = time.monotonic()
    with timed(steps, Step.SNAPSHOT):
        snapshot = _Snapshot.take(cp)
    step = "count rows"
    try:
        counted = None  # the store's own count of the old state, where its files say it
        with timed(steps, Step.COUNT_ROWS):
            if check_rows:
                counted = committed_keys(cp, snapshot.files, info.last_committed_batch,
                                         info.partitions)
            before = (sum(counted.values()) if counted is not None
                      else sum(state_rows(spark, location).values()) if check_rows else None)
            source = None if not check_rows else "files" if counted is not None else "scan"
        step = "spark repartition"
        _fault("repartition-before-write")
        with timed(steps, Step.REWRITE):
            manager = spark._streamingCheckpointManager
            manager.repartition(location, partitions,
                                enforce_exactly_once_sink=skipped is None)
        _fault("repartition-after-write")
        step = "verify partitions"
        new_batch = (info.last_committed_batch if skipped is None else skipped) + 1
        with timed(steps, Step.VERIFY):
            got = partitions_of(cp, new_batch)
            if got != partitions:
                raise RuntimeError(
                    f"offsets/{new_batch} records {got} partitions, not {partitions}")
            after_info = inspect(location)
            if after_info.last_committed_batch != new_batch:
                raise RuntimeError(f"batch {new_batch} was not committed")
        step = "verify rows"
        with timed(steps, Step.COUNT_ROWS):
            after = sum(state_rows(spark, location).values()) if check_rows else None
            if counted is not None and before != after:  # the old state read, not its count
                before = sum(state_rows(spark, location, info.last_committed_batch).values())
                source = "scan"
        if before != after:
            raise RuntimeError(f"state rows changed from {before} to {after}")
        if file_sink is not None:
            step = "file sink log"
            with timed(steps, Step.VERIFY):
                for batch in (skipped, new_batch):  # one entry per batch, empty ones too
                    if batch is not None:
                        _record_sink_batch(spark, file_sink, batch)
    except Exception as e:  # every failure rolls back, then is reported
        detail = first_line(e)
        try:
            _fault("repartition-rollback", OSError)
            snapshot.restore()
            ok = partitions_of(cp, info.last_committed_batch) == info.partitions and (
                inspect(location).last_offsets_batch == (
                    info.last_committed_batch if skipped is None else skipped)
            )
        except (OSError, CheckpointError):
            ok = False
        raise RepartitionError(step, detail, ok) from e
    finally:
        snapshot.discard()
    return RepartitionResult(
        info.partitions, partitions, new_batch, before, after, time.monotonic() - started,
        source,
    )


def rollback_unfinished(location: str, info: CheckpointInfo | None = None) -> int | None:
    """Remove an unfinished repartition (``offsets/N+1`` with a new count, no commit) that a
    crash left behind; returns the batch removed, or None when there was none. ``info``: the
    checkpoint as just inspected (a start has read it: on an object store a second read is
    a request per commit entry again).

    A normal uncommitted batch (same count) is left alone: Spark replays it on start.
    """
    info = info if info is not None else inspect(location)
    pending, last = info.uncommitted_batch, info.last_committed_batch
    if pending is None or last is None:
        return None
    cp = store_of(location)
    if partitions_of(cp, pending) == info.partitions:
        return None
    for d in ("offsets", "commits"):
        for name in (str(pending), f".{pending}.crc"):
            cp.delete(d, name)
    return pending


class _Snapshot:
    """Which files existed (and copies of the small metadata ones) before an attempt.

    The copies go to a local temporary directory whatever the store (on S3 a checkpoint's
    metadata is a few hundred small objects); a changed file is found by its bytes, not its
    modification time (an object store's has one-second resolution)."""

    def __init__(self, store: CheckpointStore, files: set[str], saved: Path) -> None:
        self.store, self.files, self.saved = store, files, saved

    @classmethod
    def take(cls, store: CheckpointStore) -> _Snapshot:
        saved = Path(tempfile.mkdtemp(prefix="sa-repartition-"))
        files: set[str] = set()
        for entry in store.files():
            files.add(entry.rel)
            if entry.size <= _SMALL and "SSTs" not in entry.rel and not entry.rel.endswith(".zip"):
                dest = saved / entry.rel
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_bytes(store.read_bytes(entry.rel))
        return cls(store, files, saved)

    def restore(self) -> None:
        """Delete files created since; put back small files changed since."""
        for entry in self.store.files():
            if entry.rel not in self.files:
                self.store.delete(entry.rel)
                continue
            copy = self.saved / entry.rel
            if copy.exists():
                before = copy.read_bytes()
                if self.store.read_bytes(entry.rel) != before:
                    self.store.write_bytes(before, entry.rel)
        self.store.prune_empty_dirs(self.files)

    def discard(self) -> None:
        shutil.rmtree(self.saved, ignore_errors=True)


def _fault(point: str, error: type[Exception] = RuntimeError) -> None:
    """Tests inject failures by naming points in the env var (comma-separated)."""
    if point in os.environ.get(FAULT_ENV, "").split(","):
        raise error(f"injected fault {point} ({FAULT_ENV})")


