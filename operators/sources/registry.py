"""The sources' registry: each manifest source model's adapter, and what the runner asks of a
source through it.

:data:`ADAPTERS` maps the manifest's source model to its
:class:`operators.sources.base.SourceAdapter` (:func:`adapter_for`); :func:`source_dataframe`
turns a manifest's source into a DataFrame, :func:`capped` sets its admission cap,
:func:`source_partitions`, :func:`uses_kafka` and :func:`read_cap_option` answer the session's
and the job builder's questions. Errors are :class:`SourceError` (of :mod:`operators.errors`)
with the source and the problem named.

It lives here, not in the package's ``__init__``: an executor's Python worker imports the burst
reader (:mod:`operators.sources.burst_datasource`), which runs the package's ``__init__`` first,
and this module's imports (every adapter, the manifest models, the logger) are what the worker
need not pay (``tests/unit/operators/sources/test_sources.py::
test_an_executors_python_worker_imports_the_reader_without_the_drivers_modules``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import structlog

from contracts.streamjob import BurstSource, FileSource, JoinOp, KafkaSource
from operators.errors import SourceError
from operators.sources import burst, files, kafka
from operators.sources.base import SourceAdapter
from operators.sources.burst import register

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from contracts.streamjob import Source

log = structlog.get_logger("operators.sources")

ADAPTERS: dict[type, SourceAdapter[Any]] = {
    BurstSource: burst.ADAPTER,
    FileSource: files.ADAPTER,
    KafkaSource: kafka.ADAPTER,
}
"""The adapter of each manifest source model."""

__all__ = ["ADAPTERS", "SourceError", "adapter_for", "capped", "read_cap_option", "register",
           "source_dataframe", "source_partitions", "uses_kafka"]


def adapter_for(source: object) -> SourceAdapter[Any]:
    """The adapter of a manifest's source; :class:`SourceError` for an unknown kind."""
    adapter = ADAPTERS.get(type(source))
    if adapter is None:
        raise SourceError(f"unknown source type {type(source).__name__}")
    return adapter


def source_dataframe(
    spark: SparkSession,
    source: Source,
    *,
    run_started_at: float | None = None,
    stream: str = "main",
    streaming: bool = True,
) -> DataFrame:
    """The DataFrame a manifest's source reads.

    ``stream`` names the input in the burst source's offsets ("main", or "right:<join>"), so a
    checkpoint's offsets say which input they belong to. ``streaming=False`` is only meaningful
    for files (a snapshot of the directory) and Kafka; a burst source is read in batch mode by
    the verifier (:meth:`~operators.sources.base.SourceAdapter.committed_dataframe`).
    """
    return adapter_for(source).dataframe(
        spark, source, run_started_at=run_started_at, stream=stream, streaming=streaming
    )


def source_partitions(source: Source) -> int | None:
    """Read-stage partitions per batch, when the manifest fixes them (burst); else None.

    A Kafka source's count is the topic's (or ``minPartitions`` when larger): the runner learns
    it from each batch's offsets (:class:`operators.sources.kafka.KafkaLagProbe`).
    """
    return adapter_for(source).partitions(source)


def uses_kafka(spec: object) -> bool:
    """Whether a job reads or writes Kafka (then the session needs the connector's jars)."""
    sources = [getattr(spec, "source", None)]
    sources += [op.right.source for op in getattr(spec, "pipeline", None) or []
                if isinstance(op, JoinOp)]
    reads = any(getattr(ADAPTERS.get(type(s)), "uses_kafka", False) for s in sources)
    return reads or getattr(getattr(spec, "sink", None), "type", "") == "kafka"


def capped(
    spark: SparkSession, source: Source, records: int | None, checkpoint: str
) -> Source:
    """``source`` with its micro-batches reading at most ``records`` (the lower of it and the
    manifest's own cap), in the unit its cap counts (a file source's files: ``records`` over
    the records per file measured on its checkpoint, at least one file); unchanged when
    ``records`` is None or the source cannot be capped."""
    adapter = adapter_for(source)
    name = adapter.cap_field
    if records is None or name is None:
        return source
    per_unit = adapter.records_per_cap_unit(spark, source, checkpoint)
    if per_unit is None:
        return source
    units = files.whole_units(records, per_unit)
    own = getattr(source, name)
    value = units if own is None else min(own, units)
    log.info("admission cap set on the source", source=source.type, field=name, value=value,
             records=records, records_per_unit=round(per_unit, 1), manifest_value=own)
    return source.model_copy(update={name: value})


def read_cap_option(fmt: str | None) -> str | None:
    """The ``spark.readStream`` option that caps a micro-batch's records for ``format(fmt)``
    (``kafka``: ``maxOffsetsPerTrigger``), or None."""
    options = {a.cap_option[0]: a.cap_option[1] for a in ADAPTERS.values() if a.cap_option}
    return options.get((fmt or "").lower())
