"""Sources: where a job's records come from.

* ``burst`` (:mod:`operators.sources.burst`): deterministic records at a trace's rate, for
  burst tests and exactly-once checks;
* ``files`` (:mod:`operators.sources.files`): new files in a directory;
* ``kafka``: not yet supported (a later issue).

:func:`source_dataframe` turns a manifest's source into a DataFrame; errors are
:class:`SourceError` with the source and the problem named.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from controller.core.streamjob import BurstSource, FileSource, KafkaSource

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from controller.core.streamjob import Source


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
        raise SourceError(
            "kafka source: not yet supported (planned in a later issue); use a "
            "burst or files source"
        )
    raise SourceError(f"unknown source type {type(source).__name__}")


def source_partitions(source: Source) -> int | None:
    """Read-stage partitions per batch, when the manifest fixes them (burst); else None."""
    if isinstance(source, BurstSource):
        return source.partitions
    if isinstance(source, KafkaSource):
        return source.min_partitions
    return None
