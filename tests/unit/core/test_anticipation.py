"""Anticipation (controller/core/anticipation.py): executors up before a burst the job's own
history predicts, where reacting to the last one was too slow. Named cases; the history's times
are relative to NOW."""

from __future__ import annotations

import pytest

from contracts.history import HistoryEntry, ScalingHistory
from controller.core import Action, Reason, decide
from controller.core.anticipation import lead_seconds
from controller.core.inputs import Inputs
from controller.core.recurrence import recurrence
from tests.unit.core.factories import NOW, policy, snapshot


def _bursts(
    *ago: float,
    executors: int = 8,
    restart: bool = False,
    age: float | None = 25.0,
    anticipated: tuple[float, ...] = (),
) -> ScalingHistory:
    """Reactive scale-outs 2 -> ``executors`` ``ago`` seconds before NOW, each started with the
    backlog ``age`` seconds old and followed 70 s later by a scale-in back to 2; plus moves made
    ahead of a forecast burst ``anticipated`` seconds ago."""
    entries: list[tuple[float, HistoryEntry]] = []
    for a in ago:
        entries.append((a, HistoryEntry(
            time=NOW - a, kind="action", action="repartition" if restart else "scale",
            executors=executors, executors_before=2, partitions=8 if restart else None,
            reason=(Reason.REPARTITION_OUT if restart else Reason.SCALE_OUT).value,
            backlog_age_seconds=age)))
        if a > 70:
            entries.append((a - 70, HistoryEntry(
                time=NOW - a + 70, kind="action", action="scale", executors=2,
                executors_before=executors, reason=Reason.SCALE_IN.value)))
    for a in anticipated:
        entries.append((a, HistoryEntry(
            time=NOW - a, kind="action", action="scale", executors=executors, executors_before=2,
            reason=Reason.ANTICIPATED_BURST.value, backlog_age_seconds=1.0)))
    ordered = tuple(e for _, e in sorted(entries, key=lambda p: -p[0]))
    return ScalingHistory(entries=ordered)  # fmt: skip


QUIET = snapshot(arrival=10_000, executors=2)  # 2 executors half busy: within the band
DUE = (430.0, 280.0, 130.0)  # every 150 s; the next is due in 20 s, within the ~22 s lead


def test_the_lead_is_the_start_an_evaluation_and_the_forecast_error() -> None:
    x = Inputs(QUIET, policy(), _bursts(*DUE), NOW)
    rec = recurrence(x.history, NOW)
    assert rec is not None and rec.jitter == 0
    t = x.policy.timing
    assert lead_seconds(x, rec) == t.executor_startup_seconds + t.evaluation_interval_seconds


def test_a_burst_due_within_the_lead_is_met_with_the_layout_the_last_one_needed() -> None:
    """The last burst's scale-out started with the backlog 25 s old and its executors took
    12 s more to start: reacting let the lag reach ~37 s against a 30 s SLO. The next burst is
    due in ~20 s: the 8 executors go up now, and the reason says why and how sure it is."""
    d = decide(QUIET, policy(), _bursts(*DUE), NOW)
    assert (d.action, d.reason, d.target_executors) == (
        Action.SCALE, Reason.ANTICIPATED_BURST, 8), d.message  # fmt: skip
    assert "3 bursts came every ~150 s (each within 0 s of that period)" in d.message
    assert "the next due in ~20 s" in d.message
    assert "reacting to the last one let the backlog reach ~37 s (SLO 30 s)" in d.message
    assert d.max_records_per_batch is None  # a quiet job has no pile to drain


def test_a_burst_whose_scale_out_restarted_is_met_with_a_restart_and_its_downtime() -> None:
    x = Inputs(QUIET, policy(), _bursts(*DUE, restart=True), NOW)
    plain = Inputs(QUIET, policy(), _bursts(*DUE), NOW)
    rec, rec_plain = recurrence(x.history, NOW), recurrence(plain.history, NOW)
    assert rec is not None and rec.restarts and rec_plain is not None
    assert lead_seconds(x, rec) > lead_seconds(plain, rec_plain)  # the restart's downtime
    d = decide(QUIET, policy(), x.history, NOW)
    assert (d.action, d.reason) == (Action.REPARTITION, Reason.ANTICIPATED_BURST), d.message
    assert d.target_executors == 8 and d.target_partitions == 8
    assert "with a restart that spreads state over them" in d.message


@pytest.mark.parametrize(
    ("name", "history"),
    [
        ("the next burst is further away than the lead", _bursts(340, 190, 40)),
        ("reacting met the SLO: the backlog was 5 s old", _bursts(*DUE, age=5.0)),
        ("the reactive moves recorded no backlog age", _bursts(*DUE, age=None)),
        ("irregular bursts predict nothing", _bursts(500, 280, 130)),
        ("two bursts are not a period", _bursts(280, 130)),
    ],
)
def test_no_anticipation(name: str, history: ScalingHistory) -> None:
    d = decide(QUIET, policy(), history, NOW)
    assert d.reason is not Reason.ANTICIPATED_BURST, (name, d.message)
    assert d.action is Action.HOLD, (name, d.message)


def test_a_job_already_at_the_burst_layout_is_left_alone() -> None:
    d = decide(snapshot(arrival=10_000, executors=8), policy(), _bursts(*DUE), NOW)
    assert d.reason is not Reason.ANTICIPATED_BURST, d.message


def test_a_hold_that_waits_for_something_is_not_overridden() -> None:
    """No metrics: the engine cannot see the load, and a forecast does not replace seeing it."""
    d = decide(snapshot(arrival=None, executors=2), policy(), _bursts(*DUE), NOW)
    assert (d.action, d.reason) == (Action.HOLD, Reason.NO_METRICS), d.message


def test_moves_ahead_of_a_forecast_are_not_read_as_bursts() -> None:
    """An anticipated move comes a lead before the period's grid: read as a burst it would
    shorten the period (and feed the forecast with itself)."""
    with_forecasts = _bursts(*DUE, anticipated=(150.0,))
    rec = recurrence(with_forecasts, NOW)
    assert rec is not None and (rec.bursts, rec.period) == (3, 150)
