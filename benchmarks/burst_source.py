"""Records/s the burst source generates through Spark, beside Spark's built-in ``rate`` source.

Both feed the same ``noop`` sink in local mode; each runs a warm-up, then the timed batches.
The burst source reads a backlog that is already there (run start in the past), so it is
measured at full speed; ``rate`` runs with a high ``rowsPerSecond`` and catches up likewise.

    .venv/bin/python benchmarks/burst_source.py [--records 4000000] [--master local[2]]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time


def _session(master: str):  # type: ignore[no-untyped-def]
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (
        SparkSession.builder.master(master)
        .appName("bench-burst-source")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", "65536")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _run(spark, df, batches: int) -> tuple[int, float]:  # type: ignore[no-untyped-def]
    """Rows and seconds of ``batches`` micro-batches after the first (warm-up) one."""
    with tempfile.TemporaryDirectory() as ckpt:
        q = (
            df.writeStream.format("noop")
            .option("checkpointLocation", ckpt)
            .trigger(processingTime="0 seconds")
            .start()
        )
        try:
            while len(q.recentProgress) < batches + 1:
                if q.exception() is not None:
                    raise RuntimeError(str(q.exception()))
                time.sleep(0.2)
        finally:
            q.stop()
        timed = [p for p in q.recentProgress if p.numInputRows > 0][1 : batches + 1]
    rows = sum(p.numInputRows for p in timed)
    seconds = sum(p.durationMs["triggerExecution"] for p in timed) / 1000
    return rows, seconds


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=4_000_000, help="timed records per source")
    ap.add_argument("--batch", type=int, default=1_000_000, help="records per micro-batch")
    ap.add_argument("--partitions", type=int, default=2, help="source partitions")
    ap.add_argument("--keys", type=int, default=100_000)
    ap.add_argument("--skew", type=float, default=0.0)
    ap.add_argument("--master", default="local[2]")
    args = ap.parse_args()

    from contracts.streamjob import BurstSource
    from operators.sources.burst import burst_options, register

    spark = _session(args.master)
    register(spark)
    batches = max(1, args.records // args.batch)
    with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False) as f:
        f.write("t,input_rate\n0,10000000\n")
        trace = f.name
    source = BurstSource(
        trace=trace,
        keys=args.keys,
        skew=args.skew,
        partitions=args.partitions,
        max_records_per_batch=args.batch,
    )
    # Run start an hour ago: a backlog far larger than the run, read at full speed.
    opts = burst_options(source, time.time() - 3600)
    burst = spark.readStream.format("burst").options(**opts).load()
    b_rows, b_s = _run(spark, burst, batches)

    rate = (
        spark.readStream.format("rate")
        .option("rowsPerSecond", args.batch)
        .option("numPartitions", args.partitions)
        .load()
    )
    r_rows, r_s = _run(spark, rate, batches)
    result = {
        "master": args.master,
        "partitions": args.partitions,
        "keys": args.keys,
        "skew": args.skew,
        "burst_records_per_s": round(b_rows / b_s),
        "rate_records_per_s": round(r_rows / r_s),
        "burst_rows": b_rows,
        "rate_rows": r_rows,
        "ratio_burst_to_rate": round((b_rows / b_s) / (r_rows / r_s), 3),
    }
    print(json.dumps(result, indent=2))
    os.unlink(trace)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
