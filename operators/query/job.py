"""What a job is: the Structured Streaming query a StreamJob manifest describes.

The runtime calls, in this order::

    conf = spark_conf_for(spec)          # merge into the SparkSession's configuration
    validate_job(spark, spec)            # optional: every check, nothing started
    writer = build_query(spark, spec, query_name="wordcount", run_started_at=t0)
    query = writer.start()               # the runtime owns start/stop/restart

:func:`build_query` returns a ``DataStreamWriter`` that already carries the output mode, the
checkpoint location (``spec.checkpoint.location``), the trigger (``spec.trigger``) and, when
given, the query name. The runtime may override any of them before ``start()`` (a second
``.trigger(...)`` or ``.option("checkpointLocation", ...)`` call replaces the first).

Problems found before the query starts — a bad expression, an unknown column, a custom function
that does not import, an output mode the pipeline cannot have, an HDFS-backed state store, no
checkpoint location — raise :class:`JobDefinitionError`, which names the operator and the problem.

Operators and their output columns (built by :mod:`operators.query.pipeline`):

* ``parse``: the other columns plus the parsed fields (the text column is dropped);
* ``filter``/``project``: ``filter(condition)`` / ``selectExpr(columns)``;
* ``aggregate``: ``window_start, window_end`` (when windowed), the keys, then one column per
  aggregation named by its ``as``, else ``count`` / ``<fn>_<column>``;
* ``deduplicate``: ``dropDuplicatesWithinWatermark`` with a watermark, else ``dropDuplicates``
  (unbounded state);
* ``join``: both sides' columns; give the sides distinct column names in their pipelines;
* ``custom``: ``module:function(df, options) -> DataFrame``.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from contracts.streamjob import AggregateOp, CustomOp, DeduplicateOp, JoinOp, StreamJobSpec
from operators.errors import JobDefinitionError
from operators.jvm import jvm
from operators.query.pipeline import ReadSource, aggregation_alias, apply_operator, wrap

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming.readwriter import DataStreamWriter

    from contracts.streamjob import Sink, Source

ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
PROVIDER_KEY = "spark.sql.streaming.stateStore.providerClass"

__all__ = ["PROVIDER_KEY", "ROCKSDB_PROVIDER", "JobDefinitionError", "ReadSource",
           "aggregation_alias", "build_dataframe", "build_query", "checkpoint_conf",
           "output_mode", "source_partitions", "spark_conf_for", "stateful_operators",
           "validate_job"]


# --- what the runtime asks about a spec --------------------------------------------------------


CHECKPOINT_MANAGER_KEY = "spark.sql.streaming.checkpointFileManagerClass"
OBJECT_STORE_CHECKPOINT_MANAGER = (
    "org.apache.spark.internal.io.cloud.AbortableStreamBasedCheckpointFileManager")
"""Spark's checkpoint file manager for object stores (spark-hadoop-cloud, among the S3A jars):
an offsets or commit entry is written straight to its key and the upload aborted on failure,
where the default writes a temporary file and renames it (S3A renames by copy and delete)."""


def spark_conf_for(spec: StreamJobSpec) -> dict[str, str]:
    """Spark settings the job needs; the runtime merges them into the session.

    RocksDB state store (state repartition needs it), the starting state partitions (a
    checkpoint's own count wins after the first batch), then the manifest's ``spark.conf``.
    """
    conf = {
        PROVIDER_KEY: ROCKSDB_PROVIDER,
        "spark.sql.shuffle.partitions": str(spec.state_partitions),
        # Python data sources hand Arrow batches over; keep them large (rows per batch).
        "spark.sql.execution.arrow.maxRecordsPerBatch": "65536",
    }
    if spec.checkpoint.on_object_store:
        conf[CHECKPOINT_MANAGER_KEY] = OBJECT_STORE_CHECKPOINT_MANAGER
    conf.update(spec.spark.conf)
    return conf


def stateful_operators(spec: StreamJobSpec) -> list[str]:
    """Names of the operators that keep keyed state (aggregate, deduplicate, join, stateful
    custom), in pipeline order."""
    stateful = (AggregateOp, DeduplicateOp, JoinOp)
    return [
        op.name
        for op in spec.pipeline or []
        if isinstance(op, stateful) or (isinstance(op, CustomOp) and op.stateful)
    ]


def source_partitions(spec: StreamJobSpec) -> int | None:
    """Read-stage partitions per batch of the main source, when the manifest fixes them."""
    from operators.sources.registry import source_partitions as _parts

    return _parts(spec.source) if spec.source is not None else None


def output_mode(spec: StreamJobSpec) -> str:
    """The sink's output mode (``append``, ``update`` or ``complete``), as the manifest says."""
    return declared_sink(spec).output_mode


def declared_sink(spec: StreamJobSpec) -> Sink:
    """The sink of a declared pipeline (the model gives every pipeline one; a job that runs a
    script or a function has none, and nothing here builds it)."""
    if spec.sink is None:
        raise JobDefinitionError("sink", "this job declares no sink: it runs a script or a "
                                 "function, not a declared pipeline")
    return spec.sink


# --- building ----------------------------------------------------------------------------------


def build_dataframe(
    spark: SparkSession,
    spec: StreamJobSpec,
    *,
    run_started_at: float | None = None,
    read: ReadSource | None = None,
) -> DataFrame:
    """The (analysed, not started) result DataFrame of the pipeline.

    ``read`` replaces the streaming source reader (the verifier passes a batch reader over the
    committed offsets); by default sources are streams, every burst source sharing one run
    start (``run_started_at``, Unix s; None = now), so a join's inputs run on one clock.
    """
    if read is None:
        started = time.time() if run_started_at is None else run_started_at
        read = _stream_reader(spark, started)
    if spec.source is None:
        raise JobDefinitionError("source", "this job declares no source: it runs a script or "
                                 "a function, not a declared pipeline")
    df = read(spec.source, "main")
    for op in spec.pipeline or []:
        df = apply_operator(spark, df, op, read)
    return df


def validate_job(
    spark: SparkSession, spec: StreamJobSpec, *, run_started_at: float | None = None
) -> DataFrame:
    """Every check :func:`build_query` makes, without starting anything; returns the analysed
    result DataFrame. Raises :class:`JobDefinitionError`."""
    _check_checkpoint(spec)
    _check_state_store(spark, spec)
    from operators.query.sinks import check_sink

    sink = declared_sink(spec)
    wrap("sink", lambda: check_sink(sink))
    df = build_dataframe(spark, spec, run_started_at=run_started_at)
    _check_output_mode(spark, df, spec)
    return df


def build_query(
    spark: SparkSession,
    spec: StreamJobSpec,
    *,
    run_started_at: float | None = None,
    query_name: str | None = None,
) -> DataStreamWriter:
    """The job's ``DataStreamWriter``, checked and configured, not started (see module doc).

    ``run_started_at`` (Unix s) is the burst sources' run start for a fresh checkpoint; once
    the checkpoint holds an offset, the run start comes from there, so replays are identical.
    """
    df = validate_job(spark, spec, run_started_at=run_started_at)
    from operators.query.sinks import sink_writer

    keys = _key_columns(spec, df)
    sink = declared_sink(spec)
    writer: DataStreamWriter = wrap(
        "sink", lambda: sink_writer(df, sink, query_name=query_name, key_columns=keys)
    )
    writer = writer.option("checkpointLocation", spec.checkpoint.location)
    if query_name:
        writer = writer.queryName(query_name)
    interval = spec.trigger.interval_seconds
    return writer.trigger(processingTime=f"{round(interval * 1000)} milliseconds")


def _key_columns(spec: StreamJobSpec, df: DataFrame) -> list[str]:
    """Output columns that identify a row of a final aggregation (window and grouping keys):
    the kafka sink's record key. Empty for other pipelines."""
    final = spec.pipeline[-1] if spec.pipeline else None
    if not isinstance(final, AggregateOp):
        return []
    values = {aggregation_alias(a) for a in final.aggregations}
    return [c for c in df.columns if c not in values]


def _stream_reader(spark: SparkSession, started: float) -> ReadSource:
    from operators.errors import SourceError
    from operators.sources.registry import source_dataframe

    def read(source: Source, stream: str) -> DataFrame:
        where = "source" if stream == "main" else f"operator {stream.split(':', 1)[1]!r} (join)"
        try:
            return source_dataframe(spark, source, run_started_at=started, stream=stream)
        except SourceError as e:
            raise JobDefinitionError(where, str(e)) from None

    return read


# --- checks ------------------------------------------------------------------------------------


def _check_checkpoint(spec: StreamJobSpec) -> None:
    checkpoint = getattr(spec, "checkpoint", None)
    location = getattr(checkpoint, "location", None)
    if not location or not str(location).strip():
        raise JobDefinitionError(
            "checkpoint", "no checkpoint location: set spec.checkpoint.location"
        )


def checkpoint_conf(location: str) -> dict[str, str]:
    """The Spark settings recorded in a checkpoint's latest offsets file ({} if none or if it
    cannot be read: :func:`operators.state.inspect` at start says why)."""
    from operators.state.checkpoint import batches, read_offsets

    try:
        ids = batches(location, "offsets")
        return dict(read_offsets(location, ids[-1])[0].get("conf", {})) if ids else {}
    except (OSError, ValueError, AttributeError):  # CheckpointError is a ValueError
        return {}


def _check_state_store(spark: SparkSession, spec: StreamJobSpec) -> None:
    provider = spark.conf.get(PROVIDER_KEY, None) or "HDFSBackedStateStoreProvider (default)"
    if "RocksDB" not in provider:
        raise JobDefinitionError(
            "state store",
            f"the session uses {provider}; state repartition needs the RocksDB provider: merge "
            f"spark_conf_for(spec) into the session ({PROVIDER_KEY}={ROCKSDB_PROVIDER})",
        )
    recorded = checkpoint_conf(spec.checkpoint.location).get(PROVIDER_KEY)
    if recorded and "RocksDB" not in recorded:
        raise JobDefinitionError(
            "state store",
            f"checkpoint {spec.checkpoint.location} was created with {recorded} (HDFS-backed); "
            "its state cannot be repartitioned: start from a new checkpoint location",
        )


def _check_output_mode(spark: SparkSession, df: DataFrame, spec: StreamJobSpec) -> None:
    """Spark's own check of the output mode against the plan, run before start()."""
    if not df.isStreaming:
        return
    view = jvm(spark)
    modes = view.org.apache.spark.sql.streaming.OutputMode
    declared = declared_sink(spec).output_mode
    mode = {"append": modes.Append, "update": modes.Update, "complete": modes.Complete}[
        declared
    ]()
    checker = view.org.apache.spark.sql.catalyst.analysis.UnsupportedOperationChecker
    wrap(
        f"output mode {declared!r}",
        lambda: checker.checkForStreaming(df._jdf.queryExecution().analyzed(), mode),
    )
