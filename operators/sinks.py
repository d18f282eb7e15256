"""Sinks: where a job's results go.

* ``files``: ``foreachBatch`` writes each micro-batch to ``<path>/batch_id=<id>/`` with
  overwrite. A batch that Spark replays after a failure (same id, same rows: the sources are
  replayable) replaces its own earlier attempt, so the directory holds every batch exactly once.
  Formats parquet, json, csv (header). In update mode a key's current value is its row in the
  highest batch id; :func:`read_files_output` reads them back with the batch id as a column.
* ``memory`` (table named after the query), ``console``, ``noop`` (throughput runs);
* ``kafka``: not yet supported (a later issue).
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING
from urllib.parse import urlparse

from controller.core.streamjob import Sink

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import DataStreamWriter
    from pyspark.sql.types import StructType

BATCH_DIR = re.compile(r"^batch_id=(\d+)$")
TEXT_OPTIONS = {
    "json": {"timestampFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSSSSXXX"},
    "csv": {"header": "true", "timestampFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSSSSXXX"},
}
"""Text formats keep timestamps to the microsecond (Spark's default stops at milliseconds)."""


class SinkError(ValueError):
    """A sink the manifest describes but we cannot write to."""


def check_sink(sink: Sink) -> None:
    """Raises :class:`SinkError` for a sink that cannot be written (before anything starts)."""
    if sink.type == "kafka":
        raise SinkError("kafka sink: not yet supported (planned in a later issue); use files")
    if sink.type == "files" and not sink.path:
        raise SinkError("files sink: needs a path")


class FilesBatchWriter:
    """The ``foreachBatch`` function of a ``files`` sink (idempotent on the batch id)."""

    def __init__(self, path: str, fmt: str) -> None:
        self.path = path.rstrip("/")
        self.fmt = fmt

    def batch_path(self, batch_id: int) -> str:
        return f"{self.path}/batch_id={batch_id}"

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        writer = batch.write.mode("overwrite").format(self.fmt)
        writer.options(**TEXT_OPTIONS.get(self.fmt, {})).save(self.batch_path(batch_id))


def sink_writer(df: DataFrame, sink: Sink, *, query_name: str | None = None) -> DataStreamWriter:
    """``df.writeStream`` set up for the sink and its output mode (not started)."""
    check_sink(sink)
    writer = df.writeStream.outputMode(sink.output_mode)
    if sink.type == "files":
        assert sink.path is not None
        return writer.foreachBatch(FilesBatchWriter(sink.path, sink.format))
    if sink.type == "memory":
        return writer.format("memory").queryName(query_name or "results")
    if sink.type == "console":
        return writer.format("console").option("truncate", "false")
    if sink.type == "noop":
        return writer.format("noop")
    raise SinkError(f"unknown sink type {sink.type}")


def committed_batch_dirs(path: str, max_batch_id: int | None = None) -> dict[int, str]:
    """``{batch id: directory}`` of a local files sink, up to ``max_batch_id`` (inclusive).

    Directories beyond it belong to a batch whose commit Spark has not recorded; the next
    start replays and overwrites them.
    """
    parsed = urlparse(path)
    local = parsed.path if parsed.scheme == "file" else path
    if parsed.scheme not in ("", "file"):
        raise SinkError(f"files sink {path}: only local paths can be read back")
    if not os.path.isdir(local):
        return {}
    out = {}
    for name in os.listdir(local):
        m = BATCH_DIR.match(name)
        if m and (max_batch_id is None or int(m.group(1)) <= max_batch_id):
            out[int(m.group(1))] = os.path.join(local, name)
    return dict(sorted(out.items()))


def read_files_output(
    spark: SparkSession,
    sink: Sink,
    schema: StructType,
    *,
    max_batch_id: int | None = None,
    path: str | None = None,
) -> DataFrame:
    """What a files sink holds, with a ``batch_id`` column, read with ``schema``."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType, StructField, StructType

    base = path or sink.path
    assert base is not None
    dirs = committed_batch_dirs(base, max_batch_id)
    with_id = StructType([*schema.fields, StructField("batch_id", LongType())])
    if not dirs:
        return spark.createDataFrame([], with_id)
    reader = (
        spark.read.schema(schema).format(sink.format).options(**TEXT_OPTIONS.get(sink.format, {}))
    )
    df = reader.load(list(dirs.values()))
    batch = F.regexp_extract(F.input_file_name(), r"batch_id=(\d+)", 1).cast("bigint")
    return df.withColumn("batch_id", batch)
