"""The named operators of a pipeline, each a DataFrame transformation analysed as it is built.

Every named operator is Spark SQL built-ins (no per-key Python state, ~300x slower here); a
problem found while building one (a bad expression, an unknown column, a custom function that
does not import) is a :class:`operators.errors.JobDefinitionError` naming the operator
(:func:`wrap`). The job builder (:mod:`operators.query.job`) calls :func:`apply_operator` for each
operator of a manifest's pipeline; the output columns are listed there.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, cast

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
)
from operators.errors import JobDefinitionError, first_line

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from contracts.streamjob import Operator, Source

T = TypeVar("T")
_JOIN_HOW = {"inner": "inner", "leftOuter": "left_outer", "rightOuter": "right_outer"}

ReadSource = Callable[["Source", str], "DataFrame"]
"""Reads a source for the stream named by the second argument ("main" or "right:<join>")."""


def aggregation_alias(agg: Aggregation) -> str:
    """Output column of one aggregation: its ``as``, else ``count`` or ``<fn>_<column>``."""
    if agg.alias:
        return agg.alias
    if agg.column is None:
        return agg.fn
    return f"{agg.fn}_{''.join(c if c.isalnum() else '_' for c in agg.column)}"



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
    out = wrap(where, build)
    wrap(where, lambda: out.schema)  # forces analysis even where it is lazy (Spark Connect)
    return out



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
    return wrap(
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
    return cast("Callable[..., Any]", fn)


def _custom(df: DataFrame, op: CustomOp) -> DataFrame:
    from pyspark.sql import DataFrame as SparkDataFrame

    where = f"operator {op.name!r} (custom)"
    fn = load_function(op.function, where)
    out = wrap(where, lambda: fn(df, dict(op.options)))
    if not isinstance(out, SparkDataFrame):
        raise JobDefinitionError(
            where, f"{op.function} returned {type(out).__name__}, not a DataFrame"
        )
    return out



def wrap(where: str, build: Callable[[], T]) -> T:
    """Runs ``build``; Spark's analysis and parse errors become JobDefinitionError(where)."""
    from py4j.protocol import Py4JJavaError
    from pyspark.errors import PySparkException

    try:
        return build()
    except JobDefinitionError:
        raise
    except Py4JJavaError as e:  # direct JVM calls are not translated by PySpark
        raise JobDefinitionError(where, first_line(e.java_exception.getMessage())) from None
    except (PySparkException, ValueError, TypeError) as e:
        raise JobDefinitionError(where, first_line(e)) from None


