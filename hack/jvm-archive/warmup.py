"""The workload whose classes go into the lanes' JVM class archive (hack/jvm-archive/build.sh).

Run by ``spark-submit``: the lanes' typical query (a burst source, a keyed count in RocksDB
state, a parquet sink, micro-batches at a 1 s trigger) built by the runner's own job builder,
for a few batches, then stopped. Every class the driver loads on the way is archived when its
JVM exits; the lanes' drivers and standalone executors load them from the archive instead of
parsing and verifying the jars again (docs/benchmark.md, the JVM class archive).
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from pyspark.sql import SparkSession

from contracts.streamjob import StreamJobSpec
from operators.query.job import build_query, spark_conf_for
from operators.sources.burst import register

BATCHES = 4
"""Committed batches before the query stops: the first plans the state, later ones reuse it."""
DEADLINE_SECONDS = 120.0
"""A warm-up that has not committed ``BATCHES`` by then stops anyway (the archive is still
valid, only smaller)."""


def main(work: Path) -> int:
    trace = work / "trace.csv"
    trace.write_text("t,input_rate\n0,2000\n", encoding="utf-8")
    spec = StreamJobSpec.model_validate({
        "source": {"type": "burst", "trace": str(trace), "keys": 500, "partitions": 2, "seed": 7},
        "pipeline": [{"type": "aggregate", "name": "count-per-key", "keys": ["key"]}],
        "sink": {"type": "files", "path": str(work / "out"), "format": "parquet",
                 "outputMode": "update"},
        "trigger": {"intervalSeconds": 1},
        "checkpoint": {"location": str(work / "cp")},
        "statePartitions": 2,
    })
    builder = SparkSession.builder.master("local[2]").appName("jvm-archive-warmup")
    for key, value in {**spark_conf_for(spec), "spark.ui.enabled": "false"}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    register(spark)
    query = build_query(spark, spec).start()
    deadline = time.monotonic() + DEADLINE_SECONDS
    while time.monotonic() < deadline and (query.lastProgress or {}).get("batchId", -1) < BATCHES:
        time.sleep(0.5)
    query.stop()
    spark.stop()
    return 0


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="jvm-archive-") as tmp:
        sys.exit(main(Path(tmp)))
