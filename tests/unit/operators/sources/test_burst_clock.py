"""The burst source's arithmetic, without Spark: arrivals, latest offsets, backlog, partitions."""

from __future__ import annotations

import re

import numpy as np
import pytest

from contracts.streamjob import BurstSource
from contracts.trace import parse_trace
from operators.errors import BurstSourceError
from operators.sources.burst_clock import BurstBacklog, BurstClock, partition_ranges

TRACE = "t,input_rate\n0,1000\n10,0\n20,5000\n30,300\n"


def _source(tmp_path, text=TRACE, **kw) -> BurstSource:
    path = tmp_path / "trace.csv"
    path.write_text(text)
    return BurstSource(trace=str(path), **kw)


def test_clock_inverts_the_trace_exactly() -> None:
    trace = parse_trace(TRACE)
    clock = BurstClock(trace)
    offsets = np.array([0, 1, 5.5, 999, 1000, 1001, 10_000, 10_001, 55_000, 60_001, 1e7])
    assert np.array_equal(clock.arrival_times(offsets), [trace.arrival_time(n) for n in offsets])
    for t in (0, 0.5, 9.99, 10, 15, 20.3, 31, 100):
        assert clock.available(t) == int(trace.arrived(t))


def test_latest_offset_counts_from_the_run_start() -> None:
    clock = BurstClock(parse_trace(TRACE))
    assert clock.latest_offset(now=1_000.0, run_start=1_000.0) == 0
    assert clock.latest_offset(now=1_015.0, run_start=1_000.0) == 10_000  # idle 10..20 s
    assert clock.latest_offset(now=1_022.0, run_start=1_000.0) == 20_000
    assert clock.arrival_time(10_000) == 10.0 and clock.arrival_time(15_000) == 21.0


@pytest.mark.parametrize(
    ("processed", "now", "expected"),
    [
        (5000, 8.0, BurstBacklog(arrived=8000, records=3000, age_seconds=3.0)),
        (8000, 8.0, BurstBacklog(arrived=8000, records=0, age_seconds=0.0)),
        (9000, 8.0, BurstBacklog(arrived=8000, records=0, age_seconds=0.0)),
        (0, 15.0, BurstBacklog(arrived=10_000, records=10_000, age_seconds=15.0)),
        (10_000, 15.0, BurstBacklog(arrived=10_000, records=0, age_seconds=0.0)),
    ],
    ids=["behind", "caught-up", "ahead-of-the-clock", "all-waiting-in-a-pause",
         "caught-up-in-a-pause"],
)
def test_backlog_after_a_batch(processed, now, expected) -> None:
    assert BurstClock(parse_trace(TRACE)).backlog(processed, now, run_start=0.0) == expected


def test_load_trace_is_scaled_by_the_unit_rate(tmp_path) -> None:
    source = _source(tmp_path, text="t,load\n0,2\n", load_unit_rate=500)
    assert BurstClock.for_source(source).available(3) == 3000


@pytest.mark.parametrize(
    ("text", "kw", "message"),
    [
        ("t,load\n0,2\n", {}, "needs source.loadUnitRate"),
        ("t,input_rate,skew\n0,10,x\n", {}, "is not a number"),
        ("t,input_rate,skew\n0,10,9\n", {}, "must be within [0, 5]"),
    ],
    ids=["load-without-unit-rate", "skew-not-a-number", "skew-out-of-range"],
)
def test_a_trace_that_cannot_run_is_a_burst_source_error(tmp_path, text, kw, message) -> None:
    with pytest.raises(BurstSourceError, match=re.escape(message)):
        BurstClock.for_source(_source(tmp_path, text=text, **kw))


def test_a_missing_trace_file_is_named(tmp_path) -> None:
    with pytest.raises(BurstSourceError, match=r"burst source trace .*nope\.csv"):
        BurstClock.for_source(BurstSource(trace=str(tmp_path / "nope.csv")))


def test_skew_per_trace_row() -> None:
    clock = BurstClock(parse_trace("t,input_rate,skew\n0,1000,0\n10,1000,2\n"))
    skews = clock.skews(np.array([0, 9_999, 10_001, 15_000], dtype=np.float64))
    assert skews is not None and skews.tolist() == [0.0, 0.0, 2.0, 2.0]
    assert BurstClock(parse_trace(TRACE), default_skew=1.1).skews(np.array([1.0])) is None
    assert BurstClock(parse_trace(TRACE), default_skew=1.1).constant_skew() == 1.1


@pytest.mark.parametrize(
    ("start", "end", "parts", "expected"),
    [
        (0, 10, 4, [(0, 2), (2, 5), (5, 8), (8, 10)]),
        (100, 103, 8, [(100, 101), (101, 102), (102, 103)]),
        (5, 5, 4, []),
        (7, 3, 4, []),
        (0, 1, 1, [(0, 1)]),
    ],
    ids=["near-equal", "fewer-records-than-parts", "empty", "backwards", "one"],
)
def test_partition_ranges_cover_the_batch_contiguously(start, end, parts, expected) -> None:
    ranges = partition_ranges(start, end, parts)
    assert ranges == expected
    assert all(b > a for a, b in ranges)
    assert sum(b - a for a, b in ranges) == max(0, end - start)
