"""The file source: new files in a directory (JSON lines, CSV, text), read as a stream.

Spark's own file stream does the work (it tracks files seen in the checkpoint's ``sources/``
log, so a restart neither rereads nor skips a file). A streaming file read needs a schema up
front: JSON and CSV take the manifest's ``schema``; text has the fixed schema ``value STRING``
(one row per line), to be split by a ``parse`` operator.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from contracts.streamjob import FileSource
from operators.errors import FileSourceError, VerifierError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from operators.sources.base import BacklogProbe
    from operators.state.committed import CommittedProgress


def read_files(spark: SparkSession, source: FileSource, *, streaming: bool = True) -> DataFrame:
    """A DataFrame over the directory (``streaming=False``: the files there now, for checks)."""
    reader = spark.readStream if streaming else spark.read
    if source.format == "text":
        if source.schema_ddl:
            raise FileSourceError(
                "files source: format text has the fixed schema 'value STRING'; "
                "drop `schema` and parse the lines with a parse operator"
            )
        reader = reader.format("text")
    else:
        if not source.schema_ddl:
            raise FileSourceError(
                f"files source: format {source.format} needs a `schema` "
                "(Spark DDL, e.g. 'user STRING, ts TIMESTAMP')"
            )
        reader = reader.format(source.format).schema(source.schema_ddl)
        if source.format == "csv":
            reader = reader.option("header", "true")
        else:
            reader = reader.option("mode", "PERMISSIVE")
    if streaming and source.max_files_per_trigger is not None:
        reader = reader.option("maxFilesPerTrigger", source.max_files_per_trigger)
    return reader.load(source.path)


class FileAdapter:
    """:class:`operators.sources.base.SourceAdapter` of :class:`FileSource`: no fixed read
    partitions, no backlog probe (a file source's offsets are log indexes, not records), no
    replay."""

    uses_kafka = False
    cap_field = None  # maxFilesPerTrigger counts files, not records
    cap_option = None

    def dataframe(
        self,
        spark: SparkSession,
        source: FileSource,
        *,
        run_started_at: float | None,
        stream: str,
        streaming: bool,
    ) -> DataFrame:
        return read_files(spark, source, streaming=streaming)

    def committed_dataframe(
        self, spark: SparkSession, source: FileSource, stream: str, committed: CommittedProgress
    ) -> DataFrame:
        raise VerifierError(
            f"input {stream!r} is a {source.type} source; only burst sources can be replayed"
        )

    def partitions(self, source: FileSource) -> int | None:
        return None

    def backlog_probe(self, source: FileSource) -> BacklogProbe | None:
        return None


ADAPTER = FileAdapter()
