"""Throughput of the same query with and without the metrics exporter, side by side.

    .venv/bin/python benchmarks/exporter_overhead.py [--seconds 60] [--rounds 2]

Runs a burst source (fixed backlog, so every batch is full) -> count per key -> noop sink in
local mode, alternately without and with the exporter (StreamingQueryListener + the REST stage
poller + a /metrics server), and prints rows/s of each and their ratio. The target is a ratio
>= 0.97 (overhead <= 3%).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def run(spark, spec, seconds: float, exporter: bool) -> float:  # type: ignore[no-untyped-def]
    from operators.driver.exporter import RunnerMetrics
    from operators.driver.listener import ProgressListener
    from operators.driver.stages import StagePoller
    from operators.query.job import build_query
    from operators.query.session import ExecutorPool

    listener = poller = None
    if exporter:
        metrics = RunnerMetrics("bench", ["count-per-key"])
        pool = ExecutorPool(spark, 1)
        poller = StagePoller(metrics, pool.rest, lambda: None)
        poller.start()
        listener = ProgressListener(metrics, lambda p: None, poller)
        spark.streams.addListener(listener)
        server = metrics.serve(0)
    q = build_query(spark, spec, query_name=f"bench_{exporter}_{time.time_ns()}").start()
    rows, t0 = 0, None
    seen: set[int] = set()
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for p in q.recentProgress:
            if p.batchId in seen:
                continue
            seen.add(p.batchId)
            if t0 is None:  # skip the first (cold) batch
                t0 = time.monotonic()
                continue
            rows += p.numInputRows
        time.sleep(0.2)
    elapsed = time.monotonic() - (t0 or time.monotonic())
    q.stop()
    if listener is not None and poller is not None:
        spark.streams.removeListener(listener)
        poller.stop()
        server[0].shutdown() if isinstance(server, tuple) else None
    return rows / elapsed if elapsed > 0 else 0.0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    from contracts.streamjob import StreamJob
    from operators.query.job import spark_conf_for

    work = Path(tempfile.mkdtemp(prefix="sa-bench-"))
    (work / "trace.csv").write_text("t,input_rate\n0,400000\n")

    def spec_for(tag: str):  # type: ignore[no-untyped-def]
        return StreamJob.model_validate({
            "metadata": {"name": "bench"},
            "spec": {
                "source": {"type": "burst", "trace": str(work / "trace.csv"), "keys": 100000,
                           "partitions": 2, "maxRecordsPerBatch": 400000},
                "pipeline": [{"type": "aggregate", "name": "count-per-key", "keys": ["key"]}],
                "sink": {"type": "noop"},
                "trigger": {"intervalSeconds": 0},
                "checkpoint": {"location": str(work / f"cp-{tag}")},
                "statePartitions": 2,
            },
        }).spec

    builder = SparkSession.builder.master("local[2]").config("spark.ui.showConsoleProgress",
                                                            "false")
    for k, v in spark_conf_for(spec_for("x")).items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    results: dict[bool, list[float]] = {False: [], True: []}
    run(spark, spec_for("warmup"), min(args.seconds, 20), False)  # JIT and caches: discarded
    for i in range(args.rounds):
        order = (False, True) if i % 2 == 0 else (True, False)  # cancel drift over time
        for exporter in order:
            rate = run(spark, spec_for(f"{i}-{exporter}"), args.seconds, exporter)
            results[exporter].append(rate)
            print(f"round {i + 1} exporter={'on ' if exporter else 'off'} {rate:,.0f} rows/s",
                  flush=True)
    off = sum(results[False]) / len(results[False])
    on = sum(results[True]) / len(results[True])
    print(f"without exporter: {off:,.0f} rows/s")
    print(f"with exporter:    {on:,.0f} rows/s")
    print(f"ratio: {on / off:.3f} (overhead {100 * (1 - on / off):.1f}%)")
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
