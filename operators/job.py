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

Every named operator is Spark SQL built-ins (no per-key Python state, ~300x slower here).
Problems found before the query starts — a bad expression, an unknown column, a custom function
that does not import, an output mode the pipeline cannot have, an HDFS-backed state store, no
checkpoint location — raise :class:`JobDefinitionError`, which names the operator and the problem.

Operators and their output columns:

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

import importlib
import json
import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from contracts.streamjob import (
    AggregateOp,
    Aggregation,
    CustomOp,
    DeduplicateOp,
    FilterOp,
    JoinOp,
    JoinSide,
    ParseOp,
    ProjectOp,
    StreamJobSpec,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import DataStreamWriter

    from contracts.streamjob import Operator, Source

ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
PROVIDER_KEY = "spark.sql.streaming.stateStore.providerClass"
_JOIN_HOW = {"inner": "inner", "leftOuter": "left_outer", "rightOuter": "right_outer"}


class JobDefinitionError(ValueError):
    """A manifest that cannot become a query. ``where`` is the operator name (or ``source``,
    ``sink``, ``checkpoint``, ``state store``, ``output mode``); ``problem`` says what is wrong."""

    def __init__(self, where: str, problem: str) -> None:
        super().__init__(f"{where}: {problem}")
        self.where = where
        self.problem = problem


ReadSource = Callable[["Source", str], "DataFrame"]
"""Reads a source for the stream named by the second argument ("main" or "right:<join>")."""


# --- what the runtime asks about a spec --------------------------------------------------------


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
    conf.update(spec.spark.conf)
    return conf


def stateful_operators(spec: StreamJobSpec) -> list[str]:
    """Names of the operators that keep keyed state (aggregate, deduplicate, join, stateful
    custom), in pipeline order."""
    stateful = (AggregateOp, DeduplicateOp, JoinOp)
    return [
        op.name
        for op in spec.pipeline
        if isinstance(op, stateful) or (isinstance(op, CustomOp) and op.stateful)
    ]


def source_partitions(spec: StreamJobSpec) -> int | None:
    """Read-stage partitions per batch of the main source, when the manifest fixes them."""
    from operators.sources import source_partitions as _parts

    return _parts(spec.source)


def output_mode(spec: StreamJobSpec) -> str:
    """The sink's output mode (``append``, ``update`` or ``complete``), as the manifest says."""
    return spec.sink.output_mode


def aggregation_alias(agg: Aggregation) -> str:
    """Output column of one aggregation: its ``as``, else ``count`` or ``<fn>_<column>``."""
    if agg.alias:
        return agg.alias
    if agg.column is None:
        return agg.fn
    return f"{agg.fn}_{''.join(c if c.isalnum() else '_' for c in agg.column)}"


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
    df = read(spec.source, "main")
    for op in spec.pipeline:
        df = apply_operator(spark, df, op, read)
    return df


def validate_job(
    spark: SparkSession, spec: StreamJobSpec, *, run_started_at: float | None = None
) -> DataFrame:
    """Every check :func:`build_query` makes, without starting anything; returns the analysed
    result DataFrame. Raises :class:`JobDefinitionError`."""
    _check_checkpoint(spec)
    _check_state_store(spark, spec)
    from operators.sinks import check_sink

    _wrap("sink", lambda: check_sink(spec.sink))
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
    from operators.sinks import sink_writer

    keys = _key_columns(spec, df)
    writer = _wrap(
        "sink", lambda: sink_writer(df, spec.sink, query_name=query_name, key_columns=keys)
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


def apply_operator(spark: SparkSession, df: DataFrame, op: Operator, read: ReadSource) -> DataFrame:
    """One named operator on ``df``, analysed now so an error names this operator."""
    builders: dict[type, Callable[[], DataFrame]] = {
        ParseOp: lambda: _parse(df, op),  # type: ignore[arg-type]
        FilterOp: lambda: df.filter(op.condition),  # type: ignore[union-attr]
        ProjectOp: lambda: df.selectExpr(*op.columns),  # type: ignore[union-attr]
        AggregateOp: lambda: _aggregate(df, op),  # type: ignore[arg-type]
        DeduplicateOp: lambda: _deduplicate(df, op),  # type: ignore[arg-type]
        JoinOp: lambda: _join(spark, df, op, read),  # type: ignore[arg-type]
        CustomOp: lambda: _custom(df, op),  # type: ignore[arg-type]
    }
    build = builders.get(type(op))
    if build is None:
        raise JobDefinitionError(getattr(op, "name", "?"), f"unknown operator {type(op).__name__}")
    where = f"operator {op.name!r} ({op.type})"
    out = _wrap(where, build)
    _wrap(where, lambda: out.schema)  # forces analysis even where it is lazy (Spark Connect)
    return out


def _stream_reader(spark: SparkSession, started: float) -> ReadSource:
    from operators.sources import SourceError, source_dataframe

    def read(source: Source, stream: str) -> DataFrame:
        where = "source" if stream == "main" else f"operator {stream.split(':', 1)[1]!r} (join)"
        try:
            return source_dataframe(spark, source, run_started_at=started, stream=stream)
        except SourceError as e:
            raise JobDefinitionError(where, str(e)) from None

    return read


def _parse(df: DataFrame, op: ParseOp) -> DataFrame:
    from pyspark.sql import functions as F

    if op.column not in df.columns:
        raise JobDefinitionError(
            f"operator {op.name!r} (parse)",
            f"no column {op.column!r} to parse (columns: {', '.join(df.columns)})",
        )
    parse = F.from_json if op.format == "json" else F.from_csv
    parsed = parse(F.col(op.column), op.schema_ddl)
    rest = [F.col(c) for c in df.columns if c != op.column]
    return df.withColumn("__parsed", parsed).select(*rest, "__parsed.*")


def _aggregate(df: DataFrame, op: AggregateOp) -> DataFrame:
    from pyspark.sql import functions as F

    if op.watermark is not None:
        df = df.withWatermark(op.watermark.column, op.watermark.delay)
    groups = [F.expr(k) for k in op.keys]
    if op.window is not None:
        w = op.window
        win = F.window(w.column, w.duration, w.slide) if w.slide else F.window(w.column, w.duration)
        groups = [win.alias("window"), *groups]
    aggs = []
    for a in op.aggregations:
        column = F.expr(a.column) if a.column else F.lit(1)
        fn = {"count": F.count, "sum": F.sum, "avg": F.avg, "min": F.min, "max": F.max}[a.fn]
        aggs.append(fn(column).alias(aggregation_alias(a)))
    out = df.groupBy(*groups).agg(*aggs)
    if op.window is None:
        return out
    rest = [F.col(f"`{c}`") for c in out.columns if c != "window"]
    return out.select(
        F.col("window.start").alias("window_start"), F.col("window.end").alias("window_end"), *rest
    )


def _deduplicate(df: DataFrame, op: DeduplicateOp) -> DataFrame:
    missing = [c for c in op.columns if c not in df.columns]
    if missing:
        raise JobDefinitionError(
            f"operator {op.name!r} (deduplicate)",
            f"unknown column(s) {', '.join(missing)} (columns: {', '.join(df.columns)})",
        )
    if op.watermark is None:
        return df.dropDuplicates(op.columns)
    return df.withWatermark(op.watermark.column, op.watermark.delay).dropDuplicatesWithinWatermark(
        op.columns
    )


def _join(spark: SparkSession, df: DataFrame, op: JoinOp, read: ReadSource) -> DataFrame:
    from pyspark.sql import functions as F

    right = side_dataframe(spark, op, read)
    left = df.withWatermark(op.watermark.column, op.watermark.delay).alias(op.alias)
    return left.join(right, F.expr(op.condition), _JOIN_HOW[op.how])


def side_dataframe(spark: SparkSession, op: JoinOp, read: ReadSource) -> DataFrame:
    """The right input of a join: its source, its operators, its watermark and alias."""
    side: JoinSide = op.right
    df = read(side.source, f"right:{op.name}")
    for sub in side.pipeline:
        df = apply_operator(spark, df, sub, read)
    where = f"operator {op.name!r} (join)"
    return _wrap(
        where,
        lambda: df.withWatermark(side.watermark.column, side.watermark.delay).alias(side.alias),
    )


def load_function(spec: str, where: str = "custom") -> Callable[..., Any]:
    """Imports ``module:function``; errors are :class:`JobDefinitionError`."""
    module_name, _, attr = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except Exception as e:  # ImportError, or whatever the module raises at import
        raise JobDefinitionError(
            where, f"cannot import module {module_name!r} of {spec!r}: {type(e).__name__}: {e}"
        ) from None
    fn = getattr(module, attr, None)
    if not callable(fn):
        raise JobDefinitionError(where, f"module {module_name!r} has no function {attr!r}")
    return fn


def _custom(df: DataFrame, op: CustomOp) -> DataFrame:
    from pyspark.sql import DataFrame as SparkDataFrame

    where = f"operator {op.name!r} (custom)"
    fn = load_function(op.function, where)
    out = _wrap(where, lambda: fn(df, dict(op.options)))
    if not isinstance(out, SparkDataFrame):
        raise JobDefinitionError(
            where, f"{op.function} returned {type(out).__name__}, not a DataFrame"
        )
    return out


# --- checks ------------------------------------------------------------------------------------


def _wrap(where: str, build: Callable[[], Any]) -> Any:
    """Runs ``build``; Spark's analysis and parse errors become JobDefinitionError(where)."""
    from py4j.protocol import Py4JJavaError
    from pyspark.errors import PySparkException

    try:
        return build()
    except JobDefinitionError:
        raise
    except Py4JJavaError as e:  # direct JVM calls are not translated by PySpark
        raise JobDefinitionError(where, _first_line(e.java_exception.getMessage())) from None
    except (PySparkException, ValueError, TypeError) as e:
        raise JobDefinitionError(where, _first_line(e)) from None


def _first_line(e: BaseException | str) -> str:
    text = str(e).strip()
    for line in text.splitlines():
        if line.strip() and not line.startswith("JVM stacktrace"):
            return line.strip()[:500]
    return type(e).__name__


def _check_checkpoint(spec: StreamJobSpec) -> None:
    checkpoint = getattr(spec, "checkpoint", None)
    location = getattr(checkpoint, "location", None)
    if not location or not str(location).strip():
        raise JobDefinitionError(
            "checkpoint", "no checkpoint location: set spec.checkpoint.location"
        )


def _local_path(location: str) -> str | None:
    parsed = urlparse(location)
    if parsed.scheme in ("", "file"):
        return parsed.path if parsed.scheme else location
    return None


def checkpoint_conf(location: str) -> dict[str, str]:
    """The Spark settings recorded in a checkpoint's latest offsets file ({} if none, or not a
    local path)."""
    path = _local_path(location)
    offsets = os.path.join(path, "offsets") if path else None
    if not offsets or not os.path.isdir(offsets):
        return {}
    batches = [int(n) for n in os.listdir(offsets) if n.isdigit()]
    if not batches:
        return {}
    with open(os.path.join(offsets, str(max(batches))), encoding="utf-8") as f:
        lines = f.read().splitlines()
    try:
        return dict(json.loads(lines[1]).get("conf", {}))
    except (IndexError, ValueError, AttributeError):
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
    jvm = spark._jvm  # type: ignore[attr-defined]
    modes = jvm.org.apache.spark.sql.streaming.OutputMode
    mode = {"append": modes.Append, "update": modes.Update, "complete": modes.Complete}[
        spec.sink.output_mode
    ]()
    checker = jvm.org.apache.spark.sql.catalyst.analysis.UnsupportedOperationChecker
    _wrap(
        f"output mode {spec.sink.output_mode!r}",
        lambda: checker.checkForStreaming(df._jdf.queryExecution().analyzed(), mode),
    )
