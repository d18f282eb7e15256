"""The reference pipelines run in local Spark and the exactly-once verifier passes."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.realcomponents import require_module

require_module("pyspark")  # skips locally, fails in CI (tests/realcomponents.py)

from operators.sources.burst_records import expected_key_counts  # noqa: E402
from operators.verifier import committed_progress, verify  # noqa: E402

pytestmark = pytest.mark.spark


def test_wordcount_counts_every_word_once(spark, tmp_path, load_spec, run_available, capped):
    spec = capped(load_spec("wordcount", tmp_path), 40_000)
    query = run_available(spark, spec)

    result = verify(spec, spark=spark)
    assert result.ok, result.message
    assert result.mode == "latest-per-key"
    assert len(query.recentProgress) >= 2, "expected several micro-batches"
    n = result.records["main"]
    assert n >= 60_000
    # The numpy model of the source agrees with the Spark recomputation.
    expected = expected_key_counts(spec.source, n)
    sink = spark.read.parquet(*[str(p) for p in Path(spec.sink.path).glob("batch_id=*")])
    final = {
        r["word"]: r["count"]
        for r in sink.groupBy("word")
        .agg({"count": "max"})
        .withColumnRenamed("max(count)", "count")
        .collect()
    }
    assert final == expected
    # The source reports its latest offset, so the backlog is visible in the progress.
    last = query.recentProgress[-1].sources[0]
    assert json.loads(last.latestOffset)["offset"] >= json.loads(last.endOffset)["offset"]


def test_windowed_clicks_per_ad(spark, tmp_path, load_spec, run_available, capped):
    spec = capped(load_spec("windowed-clicks", tmp_path), 40_000)
    run_available(spark, spec)

    result = verify(spec, spark=spark)
    assert result.ok, result.message
    assert result.keys_checked > 500  # ads x sliding windows
    out = spark.read.parquet(spec.sink.path)
    assert {"window_start", "window_end", "ad", "clicks", "cost_micros"} <= set(out.columns)


def test_windowed_clicks_append_mode_emits_closed_windows_once(
    spark, tmp_path, load_spec, run_available, capped
):
    spec = capped(load_spec("windowed-clicks", tmp_path), 100_000)
    spec = spec.model_copy(update={"sink": spec.sink.model_copy(update={"output_mode": "append"})})
    run_available(spark, spec, backlog_seconds=12)

    result = verify(spec, spark=spark)
    assert result.ok, result.message
    assert result.mode == "once-per-key"
    assert result.keys_checked > 0, "the watermark should have closed some windows"


def test_impressions_clicks_join(spark, tmp_path, load_spec, run_available):
    spec = load_spec("impressions-clicks", tmp_path)
    run_available(spark, spec, backlog_seconds=6)

    result = verify(spec, spark=spark)
    assert result.ok, result.message
    assert result.mode == "rows"
    assert set(result.records) == {"main", "right:impressions-x-clicks"}
    assert result.keys_checked > 1000  # attributed clicks


def test_restart_replays_uncommitted_batch_exactly_once(
    spark, tmp_path, load_spec, run_available, capped
):
    spec = capped(load_spec("wordcount", tmp_path), 30_000)
    run_available(spark, spec, backlog_seconds=2)
    first = committed_progress(spec.checkpoint.location)
    assert verify(spec, spark=spark).ok

    # A crash after the sink wrote batch N but before Spark committed it: drop commits/N.
    last = first.last_committed_batch
    commits = Path(spec.checkpoint.location, "commits")
    for name in (str(last), f".{last}.crc"):
        if (commits / name).exists():
            os.remove(commits / name)
    replayed = committed_progress(spec.checkpoint.location)
    assert replayed.last_committed_batch == last - 1

    # Restart with another run start: the checkpointed one must win, so the replay is identical.
    # (A larger cap catches up the backlog in few batches; replayed batch N keeps its offsets.)
    spec = capped(spec, 300_000)
    query = run_available(spark, spec, run_started_at=first.offsets["main"]["runStartUs"] / 1e6 + 1)
    after = committed_progress(spec.checkpoint.location)
    assert after.offsets["main"]["runStartUs"] == first.offsets["main"]["runStartUs"]
    assert after.last_committed_batch >= last
    assert after.records()["main"] >= first.records()["main"]
    assert query.recentProgress[0].batchId == last, "batch N must be replayed first"

    result = verify(spec, spark=spark)
    assert result.ok, result.message


def test_custom_operator_runs_in_the_pipeline(spark, tmp_path, load_spec, run_available, capped):
    spec = capped(load_spec("wordcount", tmp_path), 50_000)
    pipeline = [
        {
            "type": "custom",
            "name": "bucketed",
            "function": "operators.udf_examples:add_bucket",
            "options": {"column": "value", "buckets": "7"},
        },
        {
            "type": "aggregate",
            "name": "per-bucket",
            "keys": ["bucket"],
            "aggregations": [{"fn": "count", "as": "count"}, {"fn": "avg", "column": "value"}],
        },
    ]
    spec = type(spec).model_validate({**spec.model_dump(by_alias=True), "pipeline": pipeline})
    run_available(spark, spec, backlog_seconds=2)

    result = verify(spec, spark=spark)
    assert result.ok, result.message
    assert result.keys_checked == 7


def test_file_source_json_lines(spark, tmp_path, load_spec):
    from contracts.streamjob import StreamJobSpec
    from operators.query.job import build_query

    incoming = tmp_path / "incoming"
    incoming.mkdir()
    rows = [{"user": f"u{i % 3}", "amount": i, "payload": json.dumps({"n": i})} for i in range(30)]
    (incoming / "part-1.json").write_text("\n".join(json.dumps(r) for r in rows[:20]) + "\n")
    (incoming / "part-2.json").write_text("\n".join(json.dumps(r) for r in rows[20:]) + "\n")
    spec = StreamJobSpec.model_validate(
        {
            "source": {
                "type": "files",
                "path": str(incoming),
                "format": "json",
                "schema": "user STRING, amount BIGINT, payload STRING",
                "maxFilesPerTrigger": 1,
            },
            "pipeline": [
                {"type": "parse", "name": "payload", "column": "payload", "schema": "n BIGINT"},
                {"type": "filter", "name": "even", "condition": "n % 2 = 0"},
                {
                    "type": "aggregate",
                    "name": "per-user",
                    "keys": ["user"],
                    "aggregations": [{"fn": "sum", "column": "amount", "as": "total"}],
                },
            ],
            "sink": {"type": "files", "path": str(tmp_path / "out"), "format": "json"},
            "checkpoint": {"location": str(tmp_path / "ckpt")},
        }
    )
    query = build_query(spark, spec).trigger(availableNow=True).start()
    assert query.awaitTermination(60)
    assert len([p for p in query.recentProgress if p.numInputRows]) == 2  # one file per batch
    out = spark.read.json(str(tmp_path / "out"))
    latest = out.orderBy("batch_id").toPandas().drop_duplicates("user", keep="last")
    want = {f"u{u}": sum(i for i in range(30) if i % 3 == u and i % 2 == 0) for u in range(3)}
    assert dict(zip(latest["user"], latest["total"], strict=True)) == want
