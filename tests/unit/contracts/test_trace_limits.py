"""Trace input that used to hang, allocate petabytes or raise a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.cli import main
from contracts.trace import TraceError, load_trace, parse_trace


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("t,input_rate\n0,1e12\n", ":2: input_rate (1e+12) above 1e+09"),
        ("t,load\n0,5000\n", ":2: load (5000) above 1000"),
        ("t,load\n0,1\n1e9,2\n", ":3: t (1e+09) beyond 604800 s (a week)"),
        ("t,load\n0,1\n\0,2\n", ":3: not a number"),
        ("t,load\n" + "".join(f"{i},1\n" for i in range(100_001)), "more than 100,000 rows"),
        ("t,input_rate\n0,100,5\n", ":2: 3 fields, the header has 2"),
    ],
    ids=["rate-1e12", "load-5000", "t-1e9", "nul-byte", "too-many-rows", "extra-field"],
)
def test_refused_with_line_and_why(text: str, message: str) -> None:
    with pytest.raises(TraceError) as e:
        parse_trace(text, "x.csv")
    assert message in str(e.value) and str(e.value).startswith("x.csv")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"t,load\n0,caf\xe9\n", r"not UTF-8 text \(byte 0xe9 at offset 12\)"),
        (None, "cannot read"),
    ],
    ids=["latin-1", "missing"],
)
def test_files_that_cannot_be_read_say_so(
    tmp_path: Path, content: bytes | None, message: str
) -> None:
    path = tmp_path / "t.csv"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(TraceError, match=message):
        load_trace(str(path))
    with pytest.raises(TraceError, match="an empty path"):
        load_trace("")


def test_arrivals_are_exact_on_row_boundaries_and_between() -> None:
    tr = parse_trace("t,input_rate\n0,10\n2,0\n5,4\n")
    assert [tr.arrived(t) for t in (0, 1, 2, 3.5, 5, 6)] == [0, 10, 20, 20, 20, 24]
    assert [tr.arrival_time(n) for n in (0, 5, 20, 22)] == [0, 0.5, 2.0, 5.5]
    assert parse_trace("t,input_rate\n0,1\n3,0\n").arrival_time(10) == float("inf")


@pytest.mark.timeout(120)
def test_a_ten_thousand_row_trace_simulates(tmp_path: Path) -> None:
    """Used to take over 120 s (a pass over every row per tick); now a bisection per tick."""
    trace = tmp_path / "rows.csv"
    trace.write_text("t,load\n" + "".join(f"{i},{0.5 + (i % 7) / 4}\n" for i in range(10_000)))
    assert main(["simulate", "--trace", str(trace), "--out", str(tmp_path / "out"),
                 "--quiet"]) == 0
    assert (tmp_path / "out" / "summary.json").exists()
