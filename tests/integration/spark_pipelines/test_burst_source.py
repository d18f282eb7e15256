"""The burst source: deterministic records, the trace's clock, skew, admission control."""

from __future__ import annotations

import json
import time
from datetime import datetime

import numpy as np
import pytest

from tests.realcomponents import require_module

require_module("pyspark")  # skips locally, fails in CI (tests/realcomponents.py)
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows  # noqa: E402

from contracts.streamjob import BurstSource  # noqa: E402
from operators.sources.burst_clock import BurstClock  # noqa: E402
from operators.sources.burst_datasource import BurstStreamReader, split  # noqa: E402
from operators.sources.burst_records import BurstParams, expected_key_counts, generate  # noqa: E402

TRACE = "t,input_rate\n0,1000\n10,0\n20,5000\n30,300\n"


def _source(tmp_path, text=TRACE, **kw) -> BurstSource:
    path = tmp_path / "trace.csv"
    path.write_text(text)
    return BurstSource(trace=str(path), **kw)


def test_latest_offset_follows_the_trace_and_the_cap(tmp_path):
    params = BurstParams.for_source(_source(tmp_path), run_start_us=None)
    reader = BurstStreamReader(params)
    run_start = time.time() - 25  # 10 s at 1000/s, 10 s idle, 5 s at 5000/s
    start = {"offset": 0, "runStartUs": round(run_start * 1e6), "stream": "main"}
    before = params.clock().latest_offset(time.time(), run_start)
    latest = reader.latestOffset(start, ReadAllAvailable())["offset"]
    after = params.clock().latest_offset(time.time(), run_start)
    assert 10_000 + 24_000 < before <= latest <= after < 10_000 + 26_000
    assert reader.latestOffset(start, ReadMaxRows(5000))["offset"] == 5000
    reported = reader.reportLatestOffset()
    assert reported is not None and reported["offset"] >= latest
    assert reported["runStartUs"] == start["runStartUs"]  # the checkpointed start wins


def test_max_records_per_batch_is_the_default_read_limit(tmp_path):
    params = BurstParams.for_source(
        _source(tmp_path, max_records_per_batch=1234), run_start_us=None
    )
    assert BurstStreamReader(params).getDefaultReadLimit() == ReadMaxRows(1234)
    params = BurstParams.for_source(_source(tmp_path), run_start_us=None)
    assert isinstance(BurstStreamReader(params).getDefaultReadLimit(), ReadAllAvailable)


def test_records_are_a_pure_function_of_the_offset(tmp_path):
    params = BurstParams.for_source(_source(tmp_path, keys=50, seed=9), run_start_us=7_000_000)
    whole = generate(params, 0, 30_000, 7_000_000)
    parts = [generate(params, p.start, p.end, 7_000_000) for p in split(0, 30_000, 7, 7_000_000)]
    assert [p.num_rows for p in parts] != [] and sum(p.num_rows for p in parts) == 30_000
    import pyarrow as pa

    assert pa.Table.from_batches(parts).equals(pa.Table.from_batches([whole]))
    times = whole.column("event_time").cast("int64").to_numpy()
    assert times[0] == 7_000_000 and np.all(np.diff(times) >= 0)
    assert times[1000] == 7_000_000 + 1_000_000  # record 1000 arrives at t=1 s (1000/s)
    other = generate(
        BurstParams.for_source(_source(tmp_path, keys=50, seed=10), run_start_us=0), 0, 100, 0
    )
    assert other.column("key") != whole.slice(0, 100).column("key")


def test_zipf_skew_concentrates_keys(tmp_path):
    uniform = expected_key_counts(_source(tmp_path, keys=1000), 200_000)
    skewed = expected_key_counts(_source(tmp_path, keys=1000, skew=1.2), 200_000)
    assert sum(uniform.values()) == sum(skewed.values()) == 200_000
    assert max(uniform.values()) < 2.0 * 200
    top = sorted(skewed.values(), reverse=True)
    assert top[0] > 0.15 * 200_000  # Zipf(1.2) over 1000 keys: the hottest key ~20%
    assert skewed["k000"] == top[0]  # key 0 is the hottest
    assert top[0] / top[1] == pytest.approx(2**1.2, rel=0.1)


def test_trace_skew_column_changes_the_distribution_over_time(tmp_path):
    source = _source(tmp_path, text="t,input_rate,skew\n0,1000,0\n10,1000,2\n", keys=100)
    early = expected_key_counts(source, 10_000)
    late = expected_key_counts(source, 20_000, start=10_000)
    assert max(early.values()) < 200
    assert late["k00"] > 5000


def test_progress_reports_the_trace_backlog(spark, tmp_path, load_spec, capped):
    """A capped query falls behind; the progress's latestOffset is the trace's arrivals."""
    from operators.query.job import build_query

    spec = capped(load_spec("wordcount", tmp_path), 20_000)
    started = time.time() - 10  # 200k records waiting at 20k/s
    query = build_query(spark, spec, run_started_at=started).start()
    try:
        deadline = time.time() + 60
        while len(query.recentProgress) < 2 and time.time() < deadline:
            time.sleep(0.2)
        progress = query.recentProgress[1]
    finally:
        query.stop()
    source = progress.sources[0]
    end, latest = json.loads(source.endOffset), json.loads(source.latestOffset)
    assert end["offset"] - json.loads(source.startOffset)["offset"] == 20_000  # the cap
    assert latest["offset"] > end["offset"] + 100_000  # the backlog shows
    clock = BurstClock.for_source(spec.source)
    ts = datetime.fromisoformat(progress.timestamp).timestamp()  # when the batch planned
    assert abs(latest["offset"] - clock.latest_offset(ts, started)) < 20_000 * 5
