"""Sources: where a job's records come from.

* ``burst`` (:mod:`operators.sources.burst`): deterministic records at a trace's rate, for
  burst tests and exactly-once checks;
* ``files`` (:mod:`operators.sources.files`): new files in a directory;
* ``kafka`` (:mod:`operators.sources.kafka`): topics through Spark's Kafka connector (its jars
  on ``spark.jars``, see :func:`operators.sources.kafka.kafka_jars`).

:func:`source_dataframe` turns a manifest's source into a DataFrame; errors are
:class:`SourceError` with the source and the problem named.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from contracts.streamjob import BurstSource, FileSource, KafkaSource

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from contracts.streamjob import Source


class SourceError(ValueError):
    """A source that cannot be read as the manifest describes it."""


def register(spark: SparkSession) -> None:
    """Registers the Python data sources (``burst``) with a session; idempotent."""
    from operators.sources.burst import BurstDataSource

    spark.dataSource.register(BurstDataSource)


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
    for files (a snapshot of the directory); a burst source is read in batch mode by the verifier
    through :func:`operators.sources.burst.burst_options` with ``end_offset``.
    """
    if isinstance(source, BurstSource):
        from operators.sources.burst import BurstSourceError, burst_options

        try:
            options = burst_options(source, run_started_at, stream=stream)
        except BurstSourceError as e:
            raise SourceError(str(e)) from None
        register(spark)
        return spark.readStream.format("burst").options(**options).load()
    if isinstance(source, FileSource):
        from operators.sources.files import FileSourceError, read_files

        try:
            return read_files(spark, source, streaming=streaming)
        except FileSourceError as e:
            raise SourceError(str(e)) from None
    if isinstance(source, KafkaSource):
        from operators.sources.kafka import KafkaSourceError, read_kafka

        try:
            return read_kafka(spark, source, streaming=streaming)
        except KafkaSourceError as e:
            raise SourceError(str(e)) from None
    raise SourceError(f"unknown source type {type(source).__name__}")


def source_partitions(source: Source) -> int | None:
    """Read-stage partitions per batch, when the manifest fixes them (burst); else None.

    A Kafka source's count is the topic's (or ``minPartitions`` when larger): the runner learns
    it from each batch's offsets (:class:`operators.sources.kafka.KafkaBacklog`).
    """
    if isinstance(source, BurstSource):
        return source.partitions
    return None


def uses_kafka(spec: object) -> bool:
    """Whether a job reads or writes Kafka (then the session needs the connector's jars)."""
    from contracts.streamjob import JoinOp

    sources = [getattr(spec, "source", None)]
    sources += [op.right.source for op in getattr(spec, "pipeline", []) if isinstance(op, JoinOp)]
    sink = getattr(spec, "sink", None)
    return any(isinstance(s, KafkaSource) for s in sources) or getattr(sink, "type", "") == "kafka"
