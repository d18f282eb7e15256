"""The pieces against the real broker: the load generator's records, the lag probe, and the
Kafka source -> pipeline -> Kafka sink path verified exactly once (local Spark)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from contracts.manifests import load_job
from contracts.streamjob import KafkaSource
from operators.loadgen import LoadGenerator, burst_spec, check_records
from operators.sources.kafka import KafkaLagProbe
from tests.integration.kafka.conftest import (
    VALUE_SCHEMA,
    create_topic,
    topic_name,
    trace_file,
    write_kafka_job,
)


def read_topic(spark: Any, bootstrap: str, topic: str) -> Any:
    from pyspark.sql import functions as F

    raw = (spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap)
           .option("subscribe", topic).option("startingOffsets", "earliest").load())  # fmt: skip
    return raw.select(
        F.from_json(F.col("value").cast("string"), VALUE_SCHEMA).alias("r"),
        "partition",
        "timestamp",
    ).select("r.*", "partition", "timestamp")


def test_loadgen_writes_the_trace_as_verifiable_records(
    broker: str, spark: Any, tmp_path: Path
) -> None:
    topic = topic_name("loadgen")
    source = burst_spec(trace_file(tmp_path, [(0, 20_000), (1, 5_000)]), keys=50, seed=11)
    gen = LoadGenerator(broker, topic, source, partitions=3)
    gen.create_topic()
    stats = gen.run(duration=2.5, max_records=25_000)
    assert stats.records == 25_000 and stats.behind == 0

    rows = read_topic(spark, broker, topic).toPandas()
    assert check_records(rows, source, stats.run_start, count=25_000) == []
    assert (rows["partition"] == rows["seq"] % 3).all()
    # Kafka timestamp = scheduled arrival (ms): record 20,000 arrives at t=1 s
    first_of_second = rows[rows["seq"] == 20_000]["timestamp"].iloc[0].timestamp()
    assert first_of_second == pytest.approx(stats.run_start + 1.0, abs=0.002)

    # a tampered read-back is caught
    bad = rows.drop(rows.index[:2])
    bad.loc[bad.index[0], "value"] += 1
    problems = check_records(bad, source, stats.run_start, count=25_000)
    assert any("missing" in p for p in problems) and len(problems) >= 1


def test_lag_probe_reads_offsets_behind_and_the_oldest_record_age(
    broker: str, tmp_path: Path
) -> None:
    topic = topic_name("lag")
    source = burst_spec(trace_file(tmp_path, [(0, 10_000)]), keys=10)
    gen = LoadGenerator(broker, topic, source, partitions=2)
    gen.create_topic()
    run_start = time.time() - 30  # records scheduled 30 s ago: their age is ~30 s
    stats = gen.run(duration=0.1, run_start=run_start, max_records=4_000)
    assert stats.records == 4_000

    probe = KafkaLagProbe(KafkaSource(bootstrap_servers=broker, topic=topic))
    try:
        end = {topic: {0: 1_000, 1: 2_000}}  # partition 0 got 2,000 records, partition 1 too
        b = probe.backlog(end, None, now=time.time())
        # asked during a batch (no progress yet): the topic's records by now, as after one
        arrived = probe.arrived(json.dumps({topic: {"0": 1_000, "1": 2_000}}), time.time())
    finally:
        probe.close()
    assert arrived == 4_000
    assert b.partitions == 2 and b.latest_total == 4_000
    assert b.records == 1_000 + 0
    lag = {(x.topic, x.partition): x for x in b.lags}
    assert lag[(topic, 0)].behind == 1_000 and lag[(topic, 1)].behind == 0
    assert lag[(topic, 1)].age_seconds == 0.0
    # record 2,000 (partition 0's 1,000th) was scheduled at t=0.2 s of a run 30 s ago
    assert lag[(topic, 0)].age_seconds == pytest.approx(29.8, abs=1.5)
    assert b.age_seconds == lag[(topic, 0)].age_seconds


def test_kafka_to_kafka_exactly_once_even_with_replayed_and_cut_writes(
    broker: str, spark: Any, tmp_path: Path
) -> None:
    """Stateful count per key, Kafka in and out; then a cut write (rows of batch 1 under a new
    attempt without its marker, as a driver killed mid-write leaves) lands in the sink: the
    read-back ignores it. (A real replay after a kill: test_kafka_runner.)"""
    from operators.query.job import build_query
    from operators.query.sinks import KafkaBatchWriter
    from operators.verifier import verify

    src, out = topic_name("in"), topic_name("out")
    create_topic(broker, out, 2)
    source = burst_spec(trace_file(tmp_path, [(0, 50_000)]), keys=200, seed=5)
    gen = LoadGenerator(broker, src, source, partitions=2)
    gen.create_topic()
    gen.run(duration=1.0, max_records=30_000)
    job = load_job(write_kafka_job(tmp_path / "job", name="eo", bootstrap=broker, topic=src,
                                   out_topic=out, stateful=True, max_offsets=8_000))  # fmt: skip
    q = build_query(spark, job.spec, query_name="eo").trigger(availableNow=True).start()
    assert q.awaitTermination(240)
    assert q.exception() is None

    result = verify(job.spec, spark=spark)
    assert result.ok, result.message
    assert result.records == {"main": 30_000}
    assert (result.last_committed_batch or 0) >= 3  # 8,000 offsets per trigger

    # batch 1 again, cut short (no marker)
    writer = KafkaBatchWriter(broker, out, ["key"])
    batch = spark.createDataFrame([("k000", 999, 999)], "key STRING, count BIGINT, total BIGINT")
    headers = ("array(named_struct('key', 'sa-batch', 'value', CAST('1' AS BINARY)), "
               "named_struct('key', 'sa-attempt', 'value', CAST('zzz' AS BINARY))) AS headers")
    writer._save(batch.selectExpr("key", "to_json(struct(*)) AS value", headers))
    result = verify(job.spec, spark=spark)
    assert result.ok, result.message


_OUT_SCHEMA = "seq BIGINT, key STRING, doubled BIGINT, event_time TIMESTAMP"


def test_end_to_end_throughput(broker: str, spark: Any, tmp_path: Path) -> None:
    """Kafka -> parse, filter, project -> Kafka sink, as fast as it goes (local Spark, one
    core): the figure in docs/kafka.md. Prints ``kafka throughput: ...``."""
    from operators.query.job import build_query

    src, out = topic_name("tp-in"), topic_name("tp-out")
    n = 200_000
    source = burst_spec(trace_file(tmp_path, [(0, 1e6)]), keys=1000, seed=2)
    gen = LoadGenerator(broker, src, source, partitions=4)
    gen.create_topic()
    produced = gen.run(duration=30, max_records=n)
    job = load_job(write_kafka_job(tmp_path / "job", name="tp", bootstrap=broker, topic=src,
                                   out_topic=out, stateful=False))  # fmt: skip
    t0 = time.monotonic()
    q = build_query(spark, job.spec, query_name="tp").trigger(availableNow=True).start()
    assert q.awaitTermination(300) and q.exception() is None
    secs = time.monotonic() - t0
    from operators.query.sinks import read_kafka_output

    written = read_kafka_output(spark, job.spec.sink, _OUT_SCHEMA).count()
    assert written == n
    print(f"kafka throughput: produce {produced.rate:,.0f} records/s; "
          f"Kafka -> Spark -> Kafka {n / secs:,.0f} records/s ({n} in {secs:.1f} s, local[1])")


def test_bad_kafka_manifests_name_the_problem(broker: str, spark: Any, tmp_path: Path) -> None:
    from operators.query.job import JobDefinitionError, validate_job

    job = load_job(write_kafka_job(tmp_path / "job", name="bad", bootstrap=broker,
                                   topic=" , ", out_topic="o", stateful=False))  # fmt: skip
    with pytest.raises(JobDefinitionError, match="names no topic") as err:
        validate_job(spark, job.spec)
    assert err.value.where == "source"
