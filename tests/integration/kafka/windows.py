"""The windowed word count's exactly-once check (``examples/pyspark/kafka_windowed_wordcount.py``):
every emitted (window, word) counts exactly the topic's records in it, none is written twice,
and every window the final watermark closed is there — recounted from the topic itself.

In a test process with a Kafka-capable session: ``check_windows(spark, ...)``. From a process
whose JVM lacks the connector (the real-pod tier):

    python -m tests.integration.kafka.windows BOOTSTRAP TOPIC OUTPUT_DIR RECORDS_WRITTEN [AS]

prints the summary as JSON on its last line, exit 1 with the failed check on stderr. ``AS``:
the directory's path where the job wrote it (a pod's mount, or an ``s3a://`` URI whose objects
were copied to OUTPUT_DIR): Spark's file sink logs absolute paths, so the committed files are
read from its log with that prefix mapped to OUTPUT_DIR.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any


def readback_session(app: str = "kafka-readback") -> Any:
    """A local[1] session with Spark's Kafka connector (the jars `make tools` resolved)."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    from operators.query.job import PROVIDER_KEY, ROCKSDB_PROVIDER
    from operators.sources.kafka import kafka_jars

    session = (
        SparkSession.builder.master("local[1]")
        .appName(app)
        .config("spark.jars", ",".join(kafka_jars()))
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config(PROVIDER_KEY, ROCKSDB_PROVIDER)
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    return session


def committed_files(out: Path, written_as: str) -> list[str]:
    """The files Spark's file sink committed to ``out`` (its ``_spark_metadata`` log: the
    latest ``N.compact`` holds every entry up to N, each later ``M`` one batch's), mapped from
    the path the job wrote them at to ``out``. Files of a failed attempt are in no entry."""
    log = out / "_spark_metadata"
    batches = sorted((int(p.name.split(".")[0]), p) for p in log.iterdir()
                     if not p.name.startswith(".") and p.name.split(".")[0].isdigit())
    last_compact = max((n for n, p in batches if p.name.endswith(".compact")), default=-1)
    files: dict[str, bool] = {}
    for n, p in batches:
        if n < last_compact:
            continue
        lines = p.read_text(encoding="utf-8").splitlines()
        assert lines and lines[0] == "v1", f"{p}: not a v1 file sink log"
        for line in lines[1:]:
            entry = json.loads(line)
            files[entry["path"]] = entry.get("action", "add") == "add"
    # a directory's files are logged as file:///dir/..., an object store's as s3a://bucket/...
    prefix = ("" if "://" in written_as else "file://") + written_as.rstrip("/") + "/"
    mapped = []
    for path, added in sorted(files.items()):
        if not added:
            continue
        assert path.startswith(prefix), f"{path} was not written under {written_as}"
        mapped.append(str(out / path[len(prefix):]))
    return mapped


def check_windows(spark: Any, broker: str, topic: str, out: Path, written: int,
                  written_as: str | None = None) -> dict[str, int]:
    """Assert the output is exactly once against the topic; return what was checked."""
    from pyspark.sql import functions as F

    records = (spark.read.format("kafka").option("kafka.bootstrap.servers", broker)
               .option("subscribe", topic).option("startingOffsets", "earliest").load()
               .selectExpr("CAST(key AS STRING) AS word", "timestamp"))
    in_topic = records.count()
    assert in_topic == written, f"the topic holds {in_topic} records, {written} were written"
    expected = {(r.window_start, r.word): r["count"] for r in records.groupBy(
        F.window("timestamp", "10 seconds").start.alias("window_start"), "word").count()
        .collect()}
    if written_as is None:
        emitted = spark.read.parquet(str(out)).collect()
    else:
        files = committed_files(out, written_as)
        emitted = spark.read.parquet(*files).collect() if files else []
    keys = [(r.window_start, r.word) for r in emitted]
    assert len(keys) == len(set(keys)), "a window was written twice"
    wrong = [(k, r["count"], expected.get(k)) for k, r in zip(keys, emitted, strict=True)
             if expected.get(k) != r["count"]]
    assert not wrong, f"windows counted other than once: {wrong[:5]}"
    latest = records.agg(F.max("timestamp")).first()[0]
    closed = {k for k in expected if k[0].timestamp() + 10 <= latest.timestamp() - 10 - 1}
    missing = closed - set(keys)
    assert not missing, f"{len(missing)} closed windows never written, e.g. {sorted(missing)[:3]}"
    summary = {"rows": len(keys), "records_in_rows": sum(int(r["count"]) for r in emitted),
               "records_written": written, "closed_windows": len(closed)}
    print(f"kafka script: exactly once: {summary['rows']} (window, word) rows, "
          f"{summary['records_in_rows']} of {written} records in closed windows")
    return summary


def main(argv: list[str]) -> int:
    if len(argv) not in (5, 6):
        print(__doc__, file=sys.stderr)
        return 2
    broker, topic, out, written = argv[1], argv[2], Path(argv[3]), int(argv[4])
    spark = readback_session()
    try:
        summary = check_windows(spark, broker, topic, out, written,
                                argv[5] if len(argv) == 6 else None)
    except AssertionError as e:
        print(f"windows: {e}", file=sys.stderr)
        return 1
    finally:
        spark.stop()
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
