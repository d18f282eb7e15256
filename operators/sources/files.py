"""The file source: new files in a directory (JSON lines, CSV, text), read as a stream.

Spark's own file stream does the work (it tracks files seen in the checkpoint's ``sources/``
log, so a restart neither rereads nor skips a file). A streaming file read needs a schema up
front: JSON and CSV take the manifest's ``schema``; text has the fixed schema ``value STRING``
(one row per line), to be split by a ``parse`` operator.

The admission cap of a restart (:mod:`controller.core.admission`) counts records; Spark's file
source limits files (``maxFilesPerTrigger``). :meth:`FileAdapter.records_per_cap_unit` measures
records per file on the newest files the checkpoint's source log lists (:func:`logged_files`,
at most :data:`SAMPLE_FILES`), so the cap becomes a number of files.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

import structlog

from contracts.streamjob import FileSource
from operators.errors import FileSourceError, VerifierError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from operators.sources.base import BacklogProbe
    from operators.state.committed import CommittedProgress


log = structlog.get_logger("operators.sources.files")

SAMPLE_FILES = 8
"""Files whose rows a restart counts to turn a record cap into ``maxFilesPerTrigger``: the newest
the checkpoint's source log lists (a bounded batch read before the query starts)."""


def read_files(
    spark: SparkSession, source: FileSource, *, streaming: bool = True,
    paths: list[str] | None = None,
) -> DataFrame:
    """A DataFrame over the directory (``streaming=False``: the files there now, for checks; or
    only ``paths``, read as the stream reads them)."""
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
    target: Any = paths if paths else source.path  # a batch reader takes a list of files
    return reader.load(target)


def _location(path: str) -> tuple[str, str, str]:
    """``(scheme, host, path)`` of a path or URI; a local path (absolute from the working
    directory, as Spark qualifies it) and ``file:`` are one scheme."""
    u = urlparse(path)
    if u.scheme in ("", "file"):
        return ("file", "", os.path.abspath(unquote(u.path)))
    return (u.scheme, u.netloc, unquote(u.path).rstrip("/"))


def _log_batch(name: str) -> int:
    """The batch of a source log file (``7`` or ``9.compact``); -1 for anything else."""
    head = name.removesuffix(".compact")
    return int(head) if head.isdigit() else -1


def logged_files(checkpoint: str, directory: str, limit: int = SAMPLE_FILES) -> list[str]:
    """The newest files (at most ``limit``) under ``directory`` that the checkpoint's file
    source log lists: Spark's ``sources/<i>/<batch>`` (one JSON entry per file after a version
    line; every tenth batch ``<batch>.compact``, with the entries before it), newest batch
    first. [] when none (a first start, a glob path, another source's log)."""
    from operators.state.checkpoint import store_of

    cp, where = store_of(checkpoint), _location(directory)
    for index in cp.listdir("sources"):
        entries: list[tuple[int, str]] = []
        names = sorted((n for n in cp.listdir("sources", index) if _log_batch(n) >= 0),
                       key=_log_batch, reverse=True)
        for name in names:
            for line in cp.read_text("sources", index, name).splitlines()[1:]:
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue
                path = entry.get("path") if isinstance(entry, dict) else None
                if isinstance(path, str):
                    at = _location(path)
                    if at[:2] == where[:2] and at[2].startswith(where[2].rstrip("/") + "/"):
                        entries.append((int(entry.get("batchId", -1)), path))
            if len(entries) >= limit:
                break
        if entries:
            entries.sort(key=lambda e: e[0], reverse=True)
            return [path for _, path in entries[:limit]]
    return []


def records_per_logged_file(
    checkpoint: str, directory: str, count: Callable[[list[str]], int]
) -> float | None:
    """Records per file under ``directory``: ``count`` (rows of the files given) over the
    newest :data:`SAMPLE_FILES` files the checkpoint's source log lists. None, with the reason
    logged, when nothing is logged yet or the files are gone (``cleanSource``, moved): a cap in
    files is then not set."""
    try:
        files = logged_files(checkpoint, directory)
    except (OSError, ValueError) as e:  # CheckpointError is an OSError
        log.info("records per file unknown: the checkpoint's source log is unreadable",
                 checkpoint=checkpoint, error=str(e).splitlines()[0])
        return None
    if not files:
        log.info("records per file unknown: the checkpoint logs no file under the path yet",
                 checkpoint=checkpoint, path=directory)
        return None
    from pyspark.errors import PySparkException

    try:
        rows = count(files)
    except (PySparkException, OSError) as e:
        log.info("records per file unknown: the logged files cannot be read",
                 files=len(files), error=str(e).splitlines()[0])
        return None
    per_file = rows / len(files)
    log.info("records per file measured on the newest logged files", path=directory,
             files=len(files), records=rows, per_file=round(per_file, 1))
    return per_file if per_file > 0 else None


def whole_units(records: int, per_unit: float) -> int:
    """Whole cap units (files) within ``records`` at ``per_unit`` records each, at least one."""
    return max(1, int(records // per_unit))


class FileAdapter:
    """:class:`operators.sources.base.SourceAdapter` of :class:`FileSource`: no fixed read
    partitions, no backlog probe (a file source's offsets are log indexes, not records), no
    replay."""

    uses_kafka: bool = False
    # in files: records_per_cap_unit turns the controller's records into files
    cap_field: str | None = "max_files_per_trigger"
    cap_option: tuple[str, str] | None = None
    worker_modules: tuple[str, ...] = ()

    def records_per_cap_unit(
        self, spark: SparkSession, source: FileSource, checkpoint: str
    ) -> float | None:
        """Records per file on the newest files the checkpoint logged, read as the stream reads
        them (:func:`records_per_logged_file`)."""
        return records_per_logged_file(
            checkpoint, source.path,
            lambda files: read_files(spark, source, streaming=False, paths=files).count())

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
