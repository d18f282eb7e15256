"""Memory of recurrence (controller/core/recurrence.py): a scale-in is weighed against the next
burst the job's history predicts. Named cases; the history's times are relative to NOW."""

from __future__ import annotations

import pytest

from contracts.history import HistoryEntry, ScalingHistory
from controller.core import Action, Reason, decide
from controller.core.inputs import Inputs
from controller.core.recurrence import RECURRENCE_MIN_BURSTS, recurrence, weigh_scale_in
from tests.unit.core.factories import NOW, policy, snapshot


def _bursts(*ago: float, executors: int = 8, restart: bool = False) -> ScalingHistory:
    """Scale-outs 2 -> ``executors`` ``ago`` seconds before NOW, each followed 70 s later by a
    scale-in back to 2 (the last one included)."""
    entries: list[HistoryEntry] = []
    for a in sorted(ago, reverse=True):
        entries.append(HistoryEntry(
            time=NOW - a, kind="action", action="repartition" if restart else "scale",
            executors=executors, executors_before=2, reason=Reason.SCALE_OUT.value))
        if NOW - a + 70 < NOW:
            entries.append(HistoryEntry(
                time=NOW - a + 70, kind="action", action="scale", executors=2,
                executors_before=executors, reason=Reason.SCALE_IN.value))
    return ScalingHistory(entries=tuple(entries))  # fmt: skip


def _with_follow_up(history: ScalingHistory, ago: float) -> ScalingHistory:
    """``history`` with one more scale-out 8 -> 12 ``ago`` seconds before NOW, inside a burst
    (no scale-in since the one before it)."""
    extra = HistoryEntry(time=NOW - ago, kind="action", action="repartition", executors=12,
                         executors_before=8, reason=Reason.REPARTITION_OUT.value)
    return ScalingHistory(entries=tuple(sorted((*history.entries, extra), key=lambda e: e.time)))


QUIET = snapshot(arrival=3_000, executors=8)  # 8 executors busy well under utilization.low


@pytest.mark.parametrize(
    ("name", "history", "period", "next_in"),
    [
        ("three bursts 150 s apart, the last 40 s ago", _bursts(340, 190, 40), 150, 110),
        ("a burst carried without a scale-out leaves two periods", _bursts(490, 340, 40), 150, 110),
        ("irregular bursts predict nothing", _bursts(400, 300, 40), None, None),
        (f"under {RECURRENCE_MIN_BURSTS} bursts predict nothing", _bursts(190, 40), None, None),
        ("scale-outs with no scale-in between are one burst: a restart again 20 s after the "
         "first is no 20 s period", _with_follow_up(_bursts(490, 340, 190), 470), 150, 110),
        ("a gap of more than two periods is no period (any spacing fits a multiple of a short "
         "one)", _bursts(1000, 900, 800, 420), None, None),
    ],
)
def test_the_period_is_read_from_regular_scale_outs(
    name: str, history: ScalingHistory, period: float | None, next_in: float | None
) -> None:
    rec = recurrence(history, NOW)
    if period is None:
        assert rec is None, name
        return
    assert rec is not None, name
    assert (rec.period, rec.next_in) == pytest.approx((period, next_in)), name


def test_a_scale_in_that_pays_before_the_next_burst_is_taken_without_the_window() -> None:
    """The next burst is ~110 s away: 7 executors x 110 s saved against 8 x 12 s of start-up
    for the next scale-out. No minute of low load on record: the period, not the window,
    says the burst is over."""
    d = decide(QUIET, policy(), _bursts(340, 190, 40), NOW)
    assert (d.action, d.reason) == (Action.SCALE, Reason.SCALE_IN), d.message
    assert "bursts came every ~150 s, the next due in ~110 s" in d.message
    assert "saves ~" in d.message and "costs ~" in d.message


def test_a_scale_in_just_before_the_next_burst_is_deferred_naming_both_figures() -> None:
    """The next burst is due in ~10 s: 8 -> 1 saves 7 x 10 = 70 executor-s, less than the 96
    the scale-out it buys costs (8 executors x 12 s start-up), so the job keeps its executors."""
    d = decide(QUIET, policy(), _bursts(440, 290, 140), NOW)
    assert (d.action, d.reason) == (Action.HOLD, Reason.SCALE_DOWN_DEFERRED), d.message
    assert "the next due in ~10 s" in d.message
    assert "saves ~70 executor-s" in d.message and "keeping 8" in d.message


def test_a_restart_the_next_burst_needs_counts_its_downtime() -> None:
    plain = Inputs(QUIET, policy(), _bursts(340, 190, 40), NOW)
    restarting = Inputs(QUIET, policy(), _bursts(340, 190, 40, restart=True), NOW)
    a, b = weigh_scale_in(plain, 8, 2), weigh_scale_in(restarting, 8, 2)
    assert a is not None and b is not None
    assert "down" not in a[1] and "s down" in b[1]


def test_without_a_period_the_stabilization_window_rules() -> None:
    d = decide(QUIET, policy(), _bursts(400, 300, 40), NOW)
    assert d.reason is Reason.SCALE_DOWN_DEFERRED and "stabilization window" in d.message
