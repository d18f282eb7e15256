"""operators.driver.gap: wait for a gap only when one follows the batch in flight."""

from __future__ import annotations

import pytest

from operators.driver.gap import (
    GAP_WAIT_FACTOR,
    GAP_WAIT_MAX_SECONDS,
    GAP_WAIT_SLACK_SECONDS,
    GAP_WAIT_UNKNOWN_SECONDS,
    gap_wait_seconds,
)


def test_batches_back_to_back_leave_no_gap_to_wait_for() -> None:
    assert gap_wait_seconds(14.0, trigger_seconds=2.0) == 0.0
    assert gap_wait_seconds(2.0, trigger_seconds=2.0) == 0.0
    assert gap_wait_seconds(0.3, trigger_seconds=0.0) == 0.0  # as fast as possible


def test_batches_shorter_than_the_trigger_are_waited_for_about_one_batch() -> None:
    assert gap_wait_seconds(3.0, trigger_seconds=5.0) == pytest.approx(
        3.0 * GAP_WAIT_FACTOR + GAP_WAIT_SLACK_SECONDS)
    # longer than the old fixed 2 s when the batch is: a drain would cost a start and a batch
    assert gap_wait_seconds(3.0, trigger_seconds=5.0) > GAP_WAIT_UNKNOWN_SECONDS


def test_the_wait_is_bounded_and_defaults_before_any_batch() -> None:
    assert gap_wait_seconds(100.0, trigger_seconds=600.0) == GAP_WAIT_MAX_SECONDS
    assert gap_wait_seconds(None, trigger_seconds=2.0) == GAP_WAIT_UNKNOWN_SECONDS
