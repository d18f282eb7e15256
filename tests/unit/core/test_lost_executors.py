"""Executors lost with their node (``controller.core.lost_executors``): recovery as scale-out in
place while the loss settles, nothing sized on the batches it slowed, and the failure step
first. The engine's table (test_engine.py) has the scale-out and the hold after it."""

from __future__ import annotations

from contracts.history import HistoryEntry, ScalingHistory
from contracts.policy import ScalingPolicySpec
from controller.core import Action, Reason, decide
from tests.unit.core.factories import NOW, snapshot

MEASURED = ScalingHistory(entries=(HistoryEntry(
    time=NOW - 100, kind="recommendation", executors=2, expected_rate=12_000),))


def test_spark_replacing_the_same_count_is_enough_when_little_piled_up() -> None:
    d = decide(snapshot(arrival=3_000, executors=1, target_executors=2, backlog=10_000, age=8,
                        executors_lost=1, seconds_since_executor_loss=12),
               ScalingPolicySpec(), MEASURED, NOW)
    assert (d.action, d.reason) == (Action.HOLD, Reason.EXECUTORS_LOST), d.message
    assert "Spark replaces them up to the target 2" in d.message
    assert "for 78 s more" in d.message  # window 30 s + catch-up 60 s, less the 12 s since


def test_a_loss_past_the_window_and_its_catch_up_is_history() -> None:
    pol = ScalingPolicySpec()
    past = pol.timing.window_seconds + pol.lag.catch_up_seconds
    d = decide(snapshot(executors_lost=0, seconds_since_executor_loss=past), pol, MEASURED, NOW)
    assert d.reason is Reason.WITHIN_BAND, d.message


def test_a_dead_driver_is_recovered_even_while_a_loss_settles() -> None:
    d = decide(snapshot(arrival=10_000, driver_up=False, backlog=300_000, age=30,
                        executors_lost=2, seconds_since_executor_loss=4),
               ScalingPolicySpec(), MEASURED, NOW)
    assert (d.action, d.reason) == (Action.RECOVER, Reason.RECOVER_FAILURE), d.message


def test_a_second_loss_after_the_first_was_acted_on_is_acted_on_again() -> None:
    acted = ScalingHistory(entries=(*MEASURED.entries, HistoryEntry(
        time=NOW - 60, kind="action", action="scale", executors=3,
        reason=Reason.EXECUTORS_LOST.value)))
    d = decide(snapshot(arrival=10_000, executors=1, target_executors=3, backlog=900_000,
                        age=90, executors_lost=1, seconds_since_executor_loss=5),
               ScalingPolicySpec(), acted, NOW)
    assert (d.action, d.reason) == (Action.SCALE, Reason.EXECUTORS_LOST), d.message
    assert d.target_executors is not None and d.target_executors > 3


def test_at_executors_max_the_hold_says_so_rather_than_enough() -> None:
    pol = ScalingPolicySpec.model_validate({"executors": {"min": 1, "max": 2}})
    d = decide(snapshot(arrival=10_000, executors=1, target_executors=2, backlog=300_000, age=40,
                        executors_lost=1, seconds_since_executor_loss=5), pol, MEASURED, NOW)
    assert (d.action, d.reason) == (Action.HOLD, Reason.EXECUTORS_LOST), d.message
    assert "up to the target 2, executors.max (need" in d.message
