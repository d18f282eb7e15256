"""The demo's timeline and live line: what arrives (the trace on the burst source's clock), when
the query was down (the runner's phases), which decision a live line shows, and the label rows
of the plot's action marks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.demo_report import (
    Downtime,
    Row,
    decision_at,
    downtime,
    fill_arrivals,
    live_line,
    source_trace,
    stack_labels,
    step_line,
    trace_lead,
    write_html,
    write_timeline,
)
from contracts.history import ScalingHistory
from contracts.sources import BurstSource
from contracts.trace import parse_trace
from controller.core import Action, Decision, Evaluation, MetricsSnapshot, Reason

T0 = 1_700_000_000.0
"""The demo's t=0 (Unix s)."""


def _row(t: float, phase: str = "Running", **kw: object) -> Row:
    fields: dict = {
        "input_rate": None,
        "processed_rate": None,
        "backlog_records": None,
        "lag_seconds": None,
        "executors": 1,
        "executors_target": 1,
        "partitions": 1,
    }
    fields.update(kw)
    return Row(t=t, phase=phase, **fields)


# --- what arrives ---------------------------------------------------------------------------------


def _checkpoint(tmp_path: Path, run_start_us: int | None, committed: bool = True) -> str:
    cp = tmp_path / "cp"
    (cp / "offsets").mkdir(parents=True)
    (cp / "commits").mkdir()
    if run_start_us is not None:
        offset = {"offset": 1234, "runStartUs": run_start_us, "stream": "main"}
        meta = {"batchWatermarkMs": 0, "batchTimestampMs": 0}
        (cp / "offsets" / "0").write_text(f"v1\n{json.dumps(meta)}\n{json.dumps(offset)}\n")
    if committed:
        (cp / "commits" / "0").write_text('v1\n{"nextBatchWatermarkMs":0}\n')
    return str(cp)


@pytest.mark.parametrize(
    ("run_start_us", "committed", "expected"),
    [
        (round((T0 - 4.25) * 1e6), True, 4.25),
        (round(T0 * 1e6), True, 0.0),
        (None, False, None),
        (round((T0 - 4.25) * 1e6), False, None),
    ],
    ids=["query-built-before-ready", "same-instant", "no-batch-yet", "first-batch-uncommitted"],
)
def test_trace_lead_is_the_demo_start_minus_the_sources_run_start(
    tmp_path: Path, run_start_us: int | None, committed: bool, expected: float | None
) -> None:
    lead = trace_lead(_checkpoint(tmp_path, run_start_us, committed), T0)
    assert lead == (None if expected is None else pytest.approx(expected, abs=1e-6))


TRACE = parse_trace("t,input_rate\n0,100\n10,500\n20,0\n")


@pytest.mark.parametrize(
    ("t", "lead", "expected"),
    [
        (0.0, 0.0, 100.0),
        (6.9, 3.0, 100.0),  # trace time 9.9: still the first row
        (7.0, 3.0, 500.0),  # trace time 10: the step arrives 3 s early on the demo's t
        (16.9, 3.0, 500.0),
        (17.0, 3.0, 0.0),
        (500.0, 3.0, 0.0),  # past the last row, its rate holds (as the source's clock)
    ],
    ids=["start", "before-step", "step-shifted-by-lead", "before-pause", "pause", "after-end"],
)
def test_arrivals_are_the_trace_at_t_plus_the_lead(t: float, lead: float, expected: float) -> None:
    rows = [_row(t)]
    fill_arrivals(rows, TRACE, lead)
    assert rows[0].arrival_rate == expected


def test_arrivals_fill_only_rows_that_lack_them() -> None:
    rows = [_row(1.0, arrival_rate=42.0), _row(12.0)]
    fill_arrivals(rows, TRACE, 0.0)
    assert [r.arrival_rate for r in rows] == [42.0, 500.0]


def test_arrivals_do_not_follow_sparks_input_rate_through_a_repartition() -> None:
    rows = [_row(float(t), "Repartitioning" if 5 <= t < 8 else "Running",
                 input_rate=0.0 if 5 <= t < 8 else 100.0) for t in range(10)]  # fmt: skip
    fill_arrivals(rows, TRACE, 0.0)
    assert [r.arrival_rate for r in rows] == [100.0] * 10


@pytest.mark.parametrize(
    ("text", "unit_rate", "expected"),
    [
        ("t,load\n0,0.5\n10,2\n", 1000.0, [500.0, 2000.0]),
        ("t,input_rate\n0,7\n10,9\n", None, [7.0, 9.0]),
        ("t,load\n0,0.5\n", None, None),  # no unit: the demo did not calibrate
    ],
    ids=["load-scaled-by-the-unit", "records-per-second", "load-without-unit"],
)
def test_source_trace_is_in_records_per_second(
    tmp_path: Path, text: str, unit_rate: float | None, expected: list[float] | None
) -> None:
    path = tmp_path / "trace.csv"
    path.write_text(text)
    trace = source_trace(BurstSource(trace=str(path), load_unit_rate=unit_rate))
    assert (None if trace is None else [trace.rate_at(0), trace.rate_at(10)]) == expected


def test_the_timeline_keeps_its_header_and_appends_the_arrivals(tmp_path: Path) -> None:
    path = tmp_path / "timeline.csv"
    write_timeline(path, [_row(0.0, arrival_rate=5.0)])
    header = path.read_text().splitlines()[0].split(",")
    assert header[:6] == ["t", "input_rate", "processed_rate", "backlog_records", "lag_seconds",
                          "executors"]  # fmt: skip
    assert header[-1] == "arrival_rate"


# --- when the query was down --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("phases", "expected"),
    [
        ("R R R R", []),
        ("R P P P R R", [Downtime(1, 4, "repartition")]),
        ("R D D S S R", [Downtime(1, 5, "recovery")]),
        ("R C R P P", [Downtime(1, 2, "scaling"), Downtime(3, 4, "repartition")]),
        ("R O O R", []),
        ("R F D S R", [Downtime(1, 4, "recovery")]),
        ("R P D S R", [Downtime(1, 2, "repartition"), Downtime(2, 4, "recovery")]),
        ("R ? X R", []),
    ],
    ids=[
        "always-running",
        "repartition",
        "driver-killed-and-restarted",
        "scale-in-then-repartition",
        "a-scale-out-is-not-downtime",
        "failed-then-restarted",
        "repartition-then-crash",
        "stopping-and-unknown-not-shaded",
    ],
)
def test_downtime_comes_from_the_runners_phases(phases: str, expected: list[Downtime]) -> None:
    name = {"R": "Running", "P": "Repartitioning", "D": "Down", "S": "Starting", "C": "Scaling",
            "F": "Failed", "X": "Stopping", "?": "None"}  # fmt: skip
    # C: Scaling in (target 1 of 2 live); O: Scaling out (target 3 of 2 live)
    target = {"C": 1, "O": 3}
    rows = [_row(float(t), "Scaling" if p == "O" else name[p], executors=2,
                 executors_target=target.get(p, 2))
            for t, p in enumerate(phases.split())]  # fmt: skip
    assert downtime(rows) == expected


# --- the live line ------------------------------------------------------------------------------


def _evaluation(at: float, reason: Reason, message: str, acted: bool = False) -> Evaluation:
    action = Action.SCALE if reason is Reason.SCALE_OUT else Action.HOLD
    decision = Decision(action=action, reason=reason, message=message)
    return Evaluation(T0 + at, MetricsSnapshot(job="wordcount"), decision, ScalingHistory(),
                      acted=acted)  # fmt: skip


DRAINING = _evaluation(150.0, Reason.CATCHING_UP, "a backlog of 633,219 records is still draining")
WITHIN = _evaluation(162.4, Reason.WITHIN_BAND, "busy 55% within the band")


@pytest.mark.parametrize(
    ("evaluations", "t", "expected"),
    [
        ([DRAINING, WITHIN], 162.0, (WITHIN, 0.0)),  # made within this tick's second
        ([DRAINING, WITHIN], 165.0, (WITHIN, 2.6)),
        ([WITHIN, DRAINING], 165.0, (WITHIN, 2.6)),  # the latest, whatever the order
        ([DRAINING, WITHIN], 155.0, (DRAINING, 5.0)),  # the next one is not made yet
        ([DRAINING], 149.0, None),
        ([], 10.0, None),
    ],
    ids=["this-second", "seconds-ago", "unordered", "not-from-the-future", "none-yet", "empty"],
)
def test_decision_at_is_the_latest_made_by_this_tick(evaluations, t, expected) -> None:
    found = decision_at(evaluations, t, T0)
    if expected is None:
        assert found is None
    else:
        assert found is not None
        assert found[0] is expected[0] and found[1] == pytest.approx(expected[1])


@pytest.mark.parametrize(
    ("evaluations", "t", "shows", "hides"),
    [
        ([DRAINING, WITHIN], 162.0, "| WithinBand: busy 55%", ["ago", "633,219"]),
        ([DRAINING, WITHIN], 165.0, "| decision 3 s ago: WithinBand: busy 55%", ["633,219"]),
        ([DRAINING], 165.0, "| decision 15 s ago: CatchingUp: a backlog of 633,219", []),
        (
            [_evaluation(160.0, Reason.SCALE_OUT, "scale out 1 -> 2", acted=True)],
            160.0,
            "| ScaleOut (acted): scale out 1 -> 2",
            ["ago"],
        ),
        ([], 3.0, "| no decision yet", []),
    ],
    ids=["current", "current-with-age", "stale-says-its-age", "acted", "none-yet"],
)
def test_the_live_line_says_which_decision_it_shows(evaluations, t, shows, hides) -> None:
    row = _row(t, backlog_records=10.0, processed_rate=9_000.0, arrival_rate=12_000.0)
    line = live_line(row, evaluations, T0)
    assert shows in line
    assert "arrive    12,000/s done     9,000/s backlog         10" in line
    for text in hides:
        assert text not in line


# --- action labels ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spans", "levels", "expected"),
    [
        ([(0, 10), (20, 30), (40, 50)], 3, [0, 0, 0]),
        ([(0, 10), (5, 15), (12, 20)], 3, [0, 1, 0]),
        ([(0, 10), (1, 11), (2, 12)], 3, [0, 1, 2]),
        ([(0, 10), (1, 20), (2, 12), (3, 13)], 3, [0, 1, 2, 0]),  # crowded: the row freeing first
        ([(0, 10), (10, 20)], 2, [0, 0]),  # touching is not overlapping
    ],
    ids=["apart", "neighbours-stack", "three-close", "more-than-rows", "touching"],
)
def test_action_labels_stack_instead_of_overlapping(spans, levels, expected) -> None:
    assert stack_labels(spans, levels) == expected


def test_mid_action_the_live_line_says_what_is_being_done_not_the_last_finished_decision() -> None:
    repartition = Decision(
        action=Action.REPARTITION,
        reason=Reason.REPARTITION_OUT,
        message="repartition state 2 -> 5",
        target_executors=5,
        target_partitions=5,
    )
    row = _row(195.0, backlog_records=None, processed_rate=None, arrival_rate=18_937.0)
    line = live_line(row, [DRAINING], T0, acting=(140.0, repartition))
    assert line.endswith("| acting for 55 s: RepartitionStateBound: repartition state 2 -> 5")
    assert "633,219" not in line


def _saturation_row(t: float, processed: float | None, lag: float, executors: int) -> Row:
    return Row(t, processed, processed, None, lag, executors, executors, 2, "running")


def test_each_scale_out_is_checked_against_what_it_delivered_while_saturated() -> None:
    from app.demo_report import PREDICTION_SETTLE_SECONDS, graded, prediction_errors

    actions = [
        {"t": 10.0, "t_end": 20.0, "reason": "RepartitionStateBound", "executors": 2,
         "predicted_rate": 70_000.0},
        {"t": 100.0, "t_end": 101.0, "reason": "ScaleIn", "executors": 1, "predicted_rate": 1.0},
        {"t": 200.0, "t_end": 201.0, "reason": "ScaleOut", "executors": 3,
         "predicted_rate": 70_000.0},
    ]  # fmt: skip
    settle = 20.0 + PREDICTION_SETTLE_SECONDS
    rows = [
        _saturation_row(settle - 1, 10_000.0, 20.0, 2),  # still settling: not counted
        _saturation_row(settle, 60_000.0, 8.0, 2),  # saturated
        _saturation_row(settle + 1, 40_000.0, 9.0, 2),  # saturated
        _saturation_row(settle + 2, 30_000.0, 1.0, 2),  # keeping up: the rate is the load
        _saturation_row(250.0, 20_000.0, 1.0, 3),  # the last scale-out never saturated
    ]
    got = prediction_errors(rows, actions, utilization_target=0.7, saturated_lag=5.0)
    assert [(p["reason"], p["predicted_rate"], p["achieved_rate"], p["error"]) for p in got] == [
        ("RepartitionStateBound", 100_000, 50_000, -0.5),
        ("ScaleOut", 100_000, None, None),
    ]
    assert got[0]["saturated_seconds"] == 2
    # 50% of the prediction is under the engine's shortfall share: named, in the line the demo
    # prints and the report shows
    assert [p["shortfall"] for p in got] == [True, False]
    assert "a shortfall (under 60% of the prediction)" in graded(got[0])
    assert "its capacity was not observed" in graded(got[1])


# --- what waits while the query is stopped ------------------------------------------------------


@pytest.mark.parametrize(
    ("phase", "seconds", "expected"),
    [
        # 1,234 records committed; record 1,234 arrived at 10 + 234 / 500 = 10.468 s
        ("Down", 15.0, (3_500 - 1_234, 15.0 - 10.468)),
        ("Repartitioning", 12.0, (2_000 - 1_234, 12.0 - 10.468)),
        ("Starting", 30.0, (6_000 - 1_234, 30.0 - 10.468)),  # the trace ended at 20 s
        ("Running", 15.0, None),  # a running query's own figures stand
        ("Scaling", 15.0, None),
    ],
)
def test_while_stopped_the_lag_grows_behind_the_last_commit(
    tmp_path: Path, phase: str, seconds: float, expected: tuple[int, float] | None
) -> None:
    from app.demo_report import backlog_while_stopped
    from operators.sources.burst_clock import BurstClock

    run_start = T0 - 100.0
    cp = _checkpoint(tmp_path, round(run_start * 1e6))
    got = backlog_while_stopped(phase, cp, BurstClock(TRACE), run_start + seconds)
    if expected is None:
        assert got is None
        return
    assert got is not None
    assert got.records == expected[0]
    assert got.age_seconds == pytest.approx(expected[1], abs=1e-6)


def test_while_stopped_nothing_without_a_commit_or_a_trace_clock(tmp_path: Path) -> None:
    from app.demo_report import backlog_while_stopped
    from operators.sources.burst_clock import BurstClock

    uncommitted = _checkpoint(tmp_path, round(T0 * 1e6), committed=False)
    assert backlog_while_stopped("Down", uncommitted, BurstClock(TRACE), T0 + 5) is None
    assert backlog_while_stopped("Down", uncommitted, None, T0 + 5) is None


def test_an_actions_runner_steps_are_listed_slowest_first(tmp_path: Path) -> None:
    steps = {"stop_wait": 0.2, "rewrite": 3.5, "count_rows": 4.25, "first_commit": 2.0}
    assert step_line(steps) == (
        "count_rows 4.2, rewrite 3.5, first_commit 2.0, stop_wait 0.2")
    html = tmp_path / "report.html"
    action = {"t": 30.0, "t_end": 42.0, "action": "repartition", "reason": "RepartitionStateBound",
              "executors": 2, "partitions": 2, "steps": steps}
    write_html(html, {"exactly_once": True}, tmp_path / "none.png", [], [action])
    assert "<th>runner steps (s)</th>" in html.read_text(encoding="utf-8")
    assert "count_rows 4.2, rewrite 3.5" in html.read_text(encoding="utf-8")
