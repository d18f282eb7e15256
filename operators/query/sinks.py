"""Sinks: where a job's results go.

* ``files``: ``foreachBatch`` writes each micro-batch to ``<path>/batch_id=<id>/`` with
  overwrite. A batch that Spark replays after a failure (same id, same rows: the sources are
  replayable) replaces its own earlier attempt, so the directory holds every batch exactly once.
  Formats parquet, json, csv (header). In update mode a key's current value is its row in the
  highest batch id; :func:`read_files_output` reads them back with the batch id as a column.
* ``kafka``: ``foreachBatch`` writes each micro-batch's rows to the topic as JSON (``value``;
  ``key`` = the row's grouping keys as JSON when the last operator aggregates), each record
  carrying the headers ``sa-batch`` (batch id) and ``sa-attempt`` (one id per write attempt);
  after the rows are acknowledged, one *marker* record (header ``sa-marker``) says the attempt
  is complete. A replayed batch writes the same rows again under a new attempt, so a reader
  that keeps, per batch id, the rows of one complete attempt (:func:`read_kafka_output`) sees
  every batch exactly once: idempotent on the batch id, as the files sink, without Kafka
  transactions (which Spark's Kafka writer does not use).
* ``memory`` (table named after the query), ``console``, ``noop`` (throughput runs).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import uuid
from typing import TYPE_CHECKING
from urllib.parse import urlparse

from contracts.streamjob import Sink
from operators.errors import OperatorsError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming.readwriter import DataStreamWriter
    from pyspark.sql.types import StructType

BATCH_DIR = re.compile(r"^batch_id=(\d+)$")
TEXT_OPTIONS = {
    "json": {"timestampFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSSSSXXX"},
    "csv": {"header": "true", "timestampFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSSSSXXX"},
}
"""Text formats keep timestamps to the microsecond (Spark's default stops at milliseconds)."""
HEADER_BATCH, HEADER_ATTEMPT, HEADER_MARKER = "sa-batch", "sa-attempt", "sa-marker"
"""Kafka sink record headers: batch id, write attempt, and the attempt's completion marker."""
JSON_OPTIONS = TEXT_OPTIONS["json"]


class SinkError(OperatorsError, ValueError):
    """A sink the manifest describes but we cannot write to."""


def check_sink(sink: Sink) -> None:
    """Raises :class:`SinkError` for a sink that cannot be written (before anything starts)."""
    if sink.type == "kafka" and not (sink.bootstrap_servers and sink.topic):
        raise SinkError("kafka sink: needs bootstrapServers and topic")
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


def forget_unfinished_batch(spark: SparkSession, sink: Sink | None, file_sink: str | None,
                            batch: int) -> bool:
    """Whether a batch a stop left unfinished may be skipped (committed empty, its records read
    again by the next query) with exactly once kept: True when, after this call, no reader
    sees anything the batch wrote.

    * Spark's file sink (``file_sink``, a user script's ``format("parquet").option("path")``):
      readers list only the files its log records; the batch is invisible while the log has no
      entry for it (:func:`operators.state.sink_never_committed`; if it has one, the sink
      committed the batch and it must be run to its commit instead).
    * our ``files`` sink: readers take every ``batch_id=<n>`` directory up to the last
      committed batch, so the batch's directory (a partial or a whole attempt) is deleted here,
      before anything commits the batch.
    * ``noop``: nothing is written.
    * ``kafka``, ``memory``, ``console``, a user's ``foreachBatch``: what an unfinished batch
      wrote cannot be taken back or told apart: False (the caller runs the batch to its commit).
    """
    from operators import state

    if file_sink is not None:
        return state.sink_never_committed(spark, file_sink, batch)
    if sink is None:
        return False
    if sink.type == "noop":
        return True
    if sink.type == "files" and sink.path:
        out = state.open_store(sink.path)
        rel = f"batch_id={batch}"  # FilesBatchWriter.batch_path, relative to the sink's path
        if out.local:
            shutil.rmtree(out.path(rel), ignore_errors=True)
        else:  # an object store has keys, no directories
            for entry in out.files(rel):
                out.delete(entry.rel)
        return not out.exists(rel)
    return False


class KafkaBatchWriter:
    """The ``foreachBatch`` function of a ``kafka`` sink (idempotent on the batch id for readers
    that keep one complete attempt per batch: :func:`read_kafka_output`)."""

    def __init__(self, bootstrap_servers: str, topic: str, key_columns: list[str]) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.topic = topic
        self.key_columns = list(key_columns)

    def _headers(self, *pairs: tuple[str, str]):  # type: ignore[no-untyped-def]
        from pyspark.sql import functions as F

        return F.array(
            *[F.struct(F.lit(k).alias("key"), F.lit(v).cast("binary").alias("value"))
              for k, v in pairs]
        )  # fmt: skip

    def _save(self, df: DataFrame) -> None:
        (
            df.write.format("kafka")
            .option("kafka.bootstrap.servers", self.bootstrap_servers)
            .option("topic", self.topic)
            .save()
        )

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        from pyspark.sql import functions as F

        attempt = uuid.uuid4().hex[:12]
        cols = [F.col(f"`{c}`") for c in batch.columns]
        keys = [F.col(f"`{c}`") for c in self.key_columns if c in batch.columns]
        key = F.to_json(F.struct(*keys), JSON_OPTIONS) if keys else F.lit(None).cast("string")
        headers = self._headers((HEADER_BATCH, str(batch_id)), (HEADER_ATTEMPT, attempt))
        self._save(
            batch.select(
                key.alias("key"),
                F.to_json(F.struct(*cols), JSON_OPTIONS).alias("value"),
                headers.alias("headers"),
            )
        )
        # Every row above is acknowledged (the writer flushes before its tasks finish): mark
        # the attempt complete. A driver killed before this line leaves an attempt without a
        # marker, which readers drop; the replay writes the batch again.
        marker = json.dumps({"batch": batch_id, "attempt": attempt})
        marker_headers = self._headers(
            (HEADER_BATCH, str(batch_id)), (HEADER_ATTEMPT, attempt), (HEADER_MARKER, "1")
        )
        self._save(
            batch.sparkSession.createDataFrame([(marker,)], "value STRING").select(
                F.lit(None).cast("string").alias("key"), "value", marker_headers.alias("headers")
            )
        )


def sink_writer(
    df: DataFrame,
    sink: Sink,
    *,
    query_name: str | None = None,
    key_columns: list[str] | None = None,
) -> DataStreamWriter:
    """``df.writeStream`` set up for the sink and its output mode (not started)."""
    check_sink(sink)
    writer = df.writeStream.outputMode(sink.output_mode)
    if sink.type == "files":
        assert sink.path is not None
        return writer.foreachBatch(FilesBatchWriter(sink.path, sink.format))
    if sink.type == "kafka":
        assert sink.bootstrap_servers is not None and sink.topic is not None
        return writer.foreachBatch(
            KafkaBatchWriter(sink.bootstrap_servers, sink.topic, key_columns or [])
        )
    if sink.type == "memory":
        return writer.format("memory").queryName(query_name or "results")
    if sink.type == "console":
        return writer.format("console").option("truncate", "false")
    if sink.type == "noop":
        return writer.format("noop")
    raise SinkError(f"unknown sink type {sink.type}")


def read_kafka_output(
    spark: SparkSession, sink: Sink, schema: StructType, *, max_batch_id: int | None = None
) -> DataFrame:
    """What a kafka sink holds, exactly once per batch: per batch id the rows of one complete
    attempt (the smallest attempt id with a marker), parsed with ``schema``, plus ``batch_id``.
    Rows of attempts without a marker (a write cut short) and records without our headers are
    left out; ``max_batch_id`` keeps batches up to the last one the checkpoint committed."""
    from pyspark.sql import functions as F

    raw = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", sink.bootstrap_servers)
        .option("subscribe", sink.topic)
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .option("includeHeaders", "true")
        .load()
    )

    def header(name: str):  # type: ignore[no-untyped-def]
        return F.expr(f"CAST(try_element_at(filter(headers, h -> h.key = '{name}'), 1).value "
                      "AS STRING)")  # fmt: skip

    records = raw.select(
        header(HEADER_BATCH).cast("bigint").alias("batch_id"),
        header(HEADER_ATTEMPT).alias("attempt"),
        header(HEADER_MARKER).alias("marker"),
        F.col("value").cast("string").alias("value"),
    ).filter(F.col("batch_id").isNotNull())
    if max_batch_id is not None:
        records = records.filter(F.col("batch_id") <= max_batch_id)
    complete = (
        records.filter(F.col("marker").isNotNull())
        .groupBy("batch_id")
        .agg(F.min("attempt").alias("attempt"))
    )
    rows = records.filter(F.col("marker").isNull()).join(
        F.broadcast(complete), ["batch_id", "attempt"]
    )
    return rows.select(
        F.from_json("value", schema, JSON_OPTIONS).alias("r"), "batch_id"
    ).select("r.*", "batch_id")


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
