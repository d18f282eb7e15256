"""Every action that added capacity is graded once, predicted against achieved
(controller/core/grading.py). Named cases on the reference job (factories): 4 executors process
40,000 records/s at full use."""

from __future__ import annotations

import pytest

from contracts.history import HistoryEntry, ScalingHistory
from controller.core import Reason, decide
from controller.core.decision import record_recommendation
from controller.core.grading import SHORTFALL_SHARE
from tests.unit.core.factories import NOW, policy, snapshot

POLICY = policy()
SETTLED = 200.0  # seconds after the action: past cooldown + start-up + window (+ restart budget)


def _scaled_out(ago: float, expected: float, action: str = "scale",
                reason: str = Reason.SCALE_OUT.value) -> ScalingHistory:
    """One scale-out 1 -> 4 executors ``ago`` seconds before NOW, expecting ``expected``
    records/s at the target utilization."""
    return ScalingHistory(entries=(HistoryEntry(
        time=NOW - ago, kind="action", action=action, executors=4, executors_before=1,
        reason=reason, rate_before=10_000, expected_rate=expected),))  # fmt: skip


SATURATED = snapshot(arrival=60_000, executors=4, backlog=900_000, age=20)  # 40,000 processed


@pytest.mark.parametrize(
    ("name", "history", "observed", "graded"),
    [
        ("settled and saturated: graded", _scaled_out(SETTLED, 28_000), SATURATED, True),
        ("a restart settled: graded", _scaled_out(400, 28_000, "repartition",
                                                  Reason.REPARTITION_OUT.value), SATURATED, True),
        ("too soon after the action", _scaled_out(20, 28_000), SATURATED, False),
        ("the job keeps up: capacity not measured", _scaled_out(SETTLED, 28_000),
         snapshot(arrival=20_000, executors=4), False),
        ("a scale-in promised no capacity", _scaled_out(SETTLED, 28_000, "scale",
                                                        Reason.SCALE_IN.value), SATURATED, False),
    ],
)  # fmt: skip
def test_an_action_is_graded_once_it_shows_its_capacity(
    name: str, history: ScalingHistory, observed: object, graded: bool
) -> None:
    d = decide(observed, POLICY, history, NOW)  # type: ignore[arg-type]
    assert (d.grade is not None) is graded, (name, d.message)
    if graded:
        assert d.grade is not None
        assert d.grade.expected_rate == pytest.approx(28_000 / 0.7)
        assert d.grade.achieved_rate == pytest.approx(40_000)
        assert d.grade.graded_time == history.entries[0].time
        assert "achieved 100% of the predicted capacity (40,000 of 40,000" in d.message


def test_a_shortfall_is_named_and_remembered_once() -> None:
    """The action promised 70,000 records/s at the 70% target (100,000 at full use) and
    delivered 40,000 (40%, under SHORTFALL_SHARE): the decision names it, the history keeps
    one grade, and the next evaluation grades nothing again."""
    history = _scaled_out(SETTLED, 70_000)
    d = decide(SATURATED, POLICY, history, NOW)
    assert d.grade is not None and d.grade.achieved_rate == pytest.approx(40_000)
    assert SHORTFALL_SHARE > 40_000 / 100_000
    assert "achieved 40% of the predicted capacity" in d.message
    assert "a shortfall" in d.message and "noisy neighbours" in d.message
    after = record_recommendation(history, d, NOW)
    grades = [e for e in after.entries if e.kind == "grade"]
    assert len(grades) == 1 and grades[0].graded_time == NOW - SETTLED
    again = decide(SATURATED, POLICY, after, NOW + 10)
    assert again.grade is None and "graded the" not in again.message


RECOMMEND = policy(mode="recommend")


def _recommended(*ago_reason: tuple[float, str]) -> ScalingHistory:
    """Recommendations (``ago`` seconds before NOW, reason) of 1 -> 4 executors, 28,000
    records/s expected at the target, none carried out (mode: recommend)."""
    return ScalingHistory(entries=tuple(HistoryEntry(
        time=NOW - ago, kind="recommendation", executors=4, reason=reason,
        expected_rate=28_000) for ago, reason in ago_reason))  # fmt: skip


OUT, BAND = Reason.SCALE_OUT.value, Reason.WITHIN_BAND.value
RUN = _recommended((300, BAND), (SETTLED, OUT), (SETTLED - 10, OUT), (SETTLED - 20, OUT))
"""A quiet job, then a run of three scale-out recommendations, the first SETTLED s ago."""


@pytest.mark.parametrize(
    ("name", "history", "observed", "verdict"),
    [
        ("left at 1 executor, the backlog 45 s old: the scale-out was needed", RUN,
         snapshot(arrival=30_000, executors=1, backlog=900_000, age=45),
         "fell behind its 30 s SLO: the scale-out was needed"),
        ("behind, but within the SLO", RUN,
         snapshot(arrival=30_000, executors=1, backlog=200_000, age=20),
         "fell behind, within its SLO so far"),
        ("the load went away: not needed", RUN, snapshot(arrival=5_000, executors=1),
         "kept up: not needed so far"),
        ("too soon after the first recommendation", _recommended((30, OUT)),
         snapshot(arrival=30_000, executors=1, backlog=900_000, age=45), None),
        ("a run already graded is not graded again",
         ScalingHistory(entries=(*RUN.entries, HistoryEntry(
             time=NOW - 5, kind="grade", action="recommendation", executors=4, reason=OUT,
             graded_time=NOW - SETTLED))),
         snapshot(arrival=30_000, executors=1, backlog=900_000, age=45), None),
    ],
)  # fmt: skip
def test_in_recommend_mode_each_scale_out_not_carried_out_is_graded_once(
    name: str, history: ScalingHistory, observed: object, verdict: str | None
) -> None:
    """In mode: recommend a run of scale-out recommendations is one call: graded once, a
    settle time after its first, from what the job did without it."""
    d = decide(observed, RECOMMEND, history, NOW)  # type: ignore[arg-type]
    if verdict is None:
        assert d.grade is None, (name, d.message)
        return
    assert d.grade is not None and d.grade.action == "recommendation", (name, d.message)
    assert d.grade.graded_time == NOW - SETTLED, name
    assert "recommended 200 s ago and not carried out (mode: recommend)" in d.message, d.message
    assert verdict in d.message, (name, d.message)


def test_enforced_recommendations_are_not_graded_as_recommendations() -> None:
    d = decide(snapshot(arrival=30_000, executors=1, backlog=900_000, age=45), POLICY, RUN, NOW)
    assert d.grade is None or d.grade.action != "recommendation", d.message
