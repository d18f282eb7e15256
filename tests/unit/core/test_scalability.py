"""The observed scalability coefficient (Flink 1.12 fits one): a scale-out
that delivered less of its promised gain than modelled, judged once it settled while the job is
still saturated, has later gains credited only the share it delivered — so the next scale-out
asks for enough at once. Below ``safety.ineffectiveScaleUpRatio`` the move is blocked instead
(Dhalion's blacklist), and nothing is judged before the action settles or once the job keeps
up.

The case is the demo's on real Spark: 2 executors were predicted 427,514 records/s and
delivered less than the 317,000/s arriving."""

from __future__ import annotations

from dataclasses import replace

import pytest

from contracts.history import HistoryEntry, ScalingHistory
from contracts.policy import ScalingPolicySpec
from controller.core import MetricsSnapshot, Reason, StageMetrics, decide
from controller.core.capacity import CapacityModel, Layout
from tests.unit.core.factories import NOW, snapshot

POLICY = ScalingPolicySpec()


def saturated(arrival: float, processed: float = 10_500, age: float = 20) -> MetricsSnapshot:
    """Two executors busy all window, delivering ``processed`` records/s, behind by 30,000."""
    rows = processed * 30
    stages = (StageMetrics(name="parse", kind="source", partitions=None, rows=rows,
                           busy_seconds=30.0 * 2),)
    return snapshot(arrival=arrival, executors=2, backlog=30_000, age=age,
                    processed_rate=processed, stages=stages)


def scaled_out(seconds_ago: float = 90, before: float = 7_000,
               expected: float = 14_000) -> ScalingHistory:
    """1 -> 2 executors, promised ``expected`` records/s from ``before``."""
    return ScalingHistory(entries=(HistoryEntry(
        time=NOW - seconds_ago, kind="action", action="scale", executors=2, reason="ScaleOut",
        rate_before=before, expected_rate=expected),))


def test_gains_beyond_the_current_executors_are_credited_the_observed_share() -> None:
    m = CapacityModel.from_snapshot(saturated(12_000))
    assert m is not None
    one, now, four = Layout(1, None, False), Layout(2, None, False), Layout(4, None, False)
    half = replace(m, gain_share=0.5)
    assert half.capacity(now) == pytest.approx(m.capacity(now))
    assert half.capacity(one) == pytest.approx(m.capacity(one))
    assert half.capacity(four) == pytest.approx(
        m.capacity(now) + 0.5 * (m.capacity(four) - m.capacity(now)))


def test_a_scale_out_that_fell_short_makes_the_next_one_ask_for_more() -> None:
    # promised +7,000 records/s, delivered +3,500: half the modelled gain
    plain = decide(saturated(12_000), POLICY, ScalingHistory(), NOW)
    learned = decide(saturated(12_000), POLICY, scaled_out(), NOW)
    assert (plain.reason, plain.target_executors) == (Reason.SCALE_OUT, 4)
    assert (learned.reason, learned.target_executors) == (Reason.SCALE_OUT, 8)
    assert "the last scale-out delivered 50% of the gain modelled" in learned.message


@pytest.mark.parametrize(
    ("name", "observed", "history"),
    [
        ("past the cooldown, not settled: the window still holds time before the action",
         saturated(12_000), scaled_out(seconds_ago=50)),
        ("the job keeps up: no saturated rate to judge by", saturated(12_000, age=0),
         scaled_out()),
        ("it delivered all it promised", saturated(12_000, processed=14_500), scaled_out()),
    ],
)
def test_nothing_is_learned_without_the_evidence(name: str, observed: MetricsSnapshot,
                                                 history: ScalingHistory) -> None:
    plain = decide(observed, POLICY, ScalingHistory(), NOW)
    got = decide(observed, POLICY, history, NOW)
    assert (got.reason, got.target_executors) == (plain.reason, plain.target_executors), name
    assert "of the gain modelled" not in got.message, name


def test_below_the_ineffective_ratio_the_move_is_blocked_not_discounted() -> None:
    got = decide(saturated(12_000, processed=9_000), POLICY, scaled_out(), NOW)
    assert got.reason == Reason.BLOCKED_INEFFECTIVE


def test_an_ineffective_move_is_judged_once_and_its_block_expires() -> None:
    """The job stays saturated after the scale-out that fell short: the block is found once,
    holds for ``safety.blockedActionSeconds`` from then (not from every later evaluation, which
    never let it end), and afterwards the engine scales out again, crediting later gains the
    share the judged move delivered."""
    from controller.core.decision import record_recommendation

    def at(t: float) -> MetricsSnapshot:
        return saturated(12_000, processed=9_000).model_copy(update={"observed_at": t})

    first = decide(at(NOW), POLICY, scaled_out(), NOW)
    assert first.reason == Reason.BLOCKED_INEFFECTIVE and first.block is not None
    until = first.block.until
    assert until == NOW + POLICY.safety.blocked_action_seconds
    h = record_recommendation(scaled_out(), first, NOW)
    later = decide(at(NOW + 300), POLICY, h, NOW + 300)
    assert later.reason == Reason.BLOCKED_INEFFECTIVE, later.message
    assert later.block is None, "judged again: the block would be renewed at every evaluation"
    assert f"blocked until t={until:.0f}" in later.message
    h = record_recommendation(h, later, NOW + 300)
    after = decide(at(until + 10), POLICY, h, until + 10)
    assert after.reason == Reason.SCALE_OUT, after.message
    assert "the last scale-out delivered 30% of the gain modelled" in after.message
