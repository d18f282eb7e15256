"""Trace CSVs: piecewise-constant rates, their integral and its inverse, and clear errors."""

from __future__ import annotations

import math

import pytest

from contracts.trace import TraceError, parse_trace


def test_rate_integral_and_inverse() -> None:
    t = parse_trace("t,input_rate\n0,100\n10,200\n20,0\n30,0\n")
    assert t.rate_at(5) == 100 and t.rate_at(10) == 200 and t.rate_at(25) == 0
    assert t.arrived(15) == 2_000
    assert t.arrival_time(1_500) == 12.5
    assert math.isinf(t.arrival_time(3_001))
    assert (t.duration, t.mean(), t.peak()) == (30.0, 100.0, 200.0)


def test_load_trace_scales_and_keeps_extra_columns() -> None:
    t = parse_trace("t,load,skew\n0,1,0\n60,4,1.2\n")
    assert t.unit == "load"
    assert t.scaled(10_000).rate_at(61) == 40_000
    assert t.extra_at(61, "skew") == "1.2"


def test_a_recorded_timeline_replays_as_a_trace() -> None:
    t = parse_trace("t,input_rate,processed_rate,executors\n0,5,4,1\n1,6,6,2\n")
    assert t.rate_at(1) == 6


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("x,y\n0,1\n", "header must start with t"),
        ("t,foo\n0,1\n", "input_rate or a load column"),
        ("t,input_rate\n0,abc\n", "<trace>:2: not a number"),
        ("t,input_rate\n0,1\n0,2\n", "must increase"),
        ("t,input_rate\n0,-1\n", "must be finite and >= 0"),
        ("t,input_rate\n5,1\n", "first row must have t=0"),
        ("t,input_rate\n", "no rows"),
    ],
    ids=["no t", "no rate", "not a number", "not increasing", "negative", "late start", "empty"],
)
def test_bad_traces_name_the_problem(text: str, message: str) -> None:
    with pytest.raises(TraceError, match=message):
        parse_trace(text)
