"""The admission cap on a file source: a restart's cap counts records, Spark's file
source limits files (``maxFilesPerTrigger``). Our pipeline and a user's script, restarted with a
record cap on a checkpoint that already read files, read the pile of files that arrived while
they were down in batches of ``cap // records per file`` files, the records per file measured
on the files the checkpoint logged (:mod:`operators.sources.files`); each record once.

In-process on a local session (the runner's ``--max-records-per-batch`` reaches the same
``start(..., max_records_per_batch=)``: ``test_runner.py`` covers that path with the burst
source).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.slow]

PER_FILE = 200
"""Records in each file dropped."""
CAP = 500
"""The restart's admission cap in records: two whole files."""


def drop(incoming: Path, first: int, n: int) -> None:
    """``n`` JSON-lines files of :data:`PER_FILE` records, each written aside and renamed into
    place (atomic, as Spark's file source asks)."""
    incoming.mkdir(exist_ok=True)
    for i in range(first, first + n):
        tmp = incoming / f".f{i:03d}.json"
        tmp.write_text("".join(f'{{"key": "k{j % 7}"}}\n' for j in range(PER_FILE)))
        tmp.rename(incoming / f"f{i:03d}.json")


def files_per_batch(checkpoint: Path) -> dict[int, int]:
    """Files each batch read, from the file source's own log in the checkpoint."""
    per_batch: dict[int, int] = {}
    log_dir = checkpoint / "sources" / "0"
    for f in log_dir.iterdir() if log_dir.exists() else []:
        if f.name.removesuffix(".compact").isdigit():  # not Hadoop's .crc files
            for line in f.read_text().splitlines()[1:]:
                b = json.loads(line)["batchId"]
                per_batch[b] = per_batch.get(b, 0) + 1
    return dict(sorted(per_batch.items()))


def run_until_read(query: Any, checkpoint: Path, files: int) -> None:
    """Let ``query`` run until its checkpoint logged ``files`` files and it processed them all,
    then stop it between batches."""
    deadline = time.monotonic() + 120
    while sum(files_per_batch(checkpoint).values()) < files or query.lastProgress is None:
        assert time.monotonic() < deadline, (files_per_batch(checkpoint), query.status)
        time.sleep(0.5)
    query.processAllAvailable()
    query.stop()


def restarted_with_cap(tmp_path: Path, start: Any) -> dict[int, int]:
    """Start (``start(max_records_per_batch)``) on 3 files, stop, drop 12 more, start again with
    :data:`CAP`: the files each batch after the restart read."""
    incoming, checkpoint = tmp_path / "in", tmp_path / "cp"
    drop(incoming, 0, 3)
    run_until_read(start(None), checkpoint, 3)
    before = files_per_batch(checkpoint)
    assert sum(before.values()) == 3, before
    drop(incoming, 3, 12)  # the pile of the outage: 12 files, 2,400 records
    run_until_read(start(CAP), checkpoint, 15)
    after = {b: n for b, n in files_per_batch(checkpoint).items() if b not in before}
    print("files per batch before the restart", before, f"after (cap {CAP} records)", after)
    return after


def test_our_pipeline_reads_a_pile_of_files_in_files_the_cap_allows(tmp_path, local_spark):
    from contracts.streamjob import StreamJob
    from operators.query.application import PipelineStarter

    job = StreamJob.model_validate({
        "apiVersion": "stream-autoscaler.io/v1alpha1", "kind": "StreamJob",
        "metadata": {"name": "files-job"},
        "spec": {"source": {"type": "files", "path": str(tmp_path / "in"), "format": "json",
                            "schema": "key STRING"},
                 "pipeline": [{"type": "filter", "name": "keyed", "condition": "key IS NOT NULL"}],
                 "sink": {"type": "files", "path": str(tmp_path / "out"), "format": "parquet"},
                 "trigger": {"intervalSeconds": 1},
                 "checkpoint": {"location": str(tmp_path / "cp")}}})
    after = restarted_with_cap(tmp_path, lambda cap: PipelineStarter(job).start(
        local_spark, max_records_per_batch=cap))
    assert max(after.values()) == CAP // PER_FILE and len(after) == 6, after
    assert local_spark.read.parquet(str(tmp_path / "out")).count() == 15 * PER_FILE  # once


def test_a_scripts_json_reader_reads_a_pile_of_files_in_files_the_cap_allows(
    tmp_path, local_spark
):
    """The user's ``readStream.schema(...).json(path)``, which never passes through
    ``load()``, gets ``maxFilesPerTrigger`` measured with the script's own reader."""
    from contracts.streamjob import StreamJob
    from operators.query.application import ApplicationStarter

    script, out = tmp_path / "user_job.py", tmp_path / "out"
    script.write_text(
        "from pyspark.sql import SparkSession\nspark = SparkSession.builder.getOrCreate()\n"
        f"q = (spark.readStream.schema('key STRING').json({str(tmp_path / 'in')!r})\n"
        f"     .writeStream.format('parquet').option('path', {str(out)!r}).start())\n"
        "q.awaitTermination()\n", encoding="utf-8")
    job = StreamJob.model_validate({
        "apiVersion": "stream-autoscaler.io/v1alpha1", "kind": "StreamJob",
        "metadata": {"name": "user-job"},
        "spec": {"application": {"script": str(script)},
                 "checkpoint": {"location": str(tmp_path / "cp")}}})
    after = restarted_with_cap(tmp_path, lambda cap: ApplicationStarter(
        job, start_timeout=60).start(local_spark, max_records_per_batch=cap))
    assert max(after.values()) == CAP // PER_FILE and len(after) == 6, after
    assert local_spark.read.parquet(str(out)).count() == 15 * PER_FILE  # the sink's log: once
