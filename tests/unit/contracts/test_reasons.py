"""Reason codes are declared once, with the API types (contracts/reasons.py): the engine uses
the same objects, the history accepts only them, and a reason says itself whether it refuses."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from contracts.history import HistoryEntry
from contracts.reasons import Reason
from controller.core import reasons as core_reasons


def test_the_core_uses_the_contract_s_reasons() -> None:
    assert core_reasons.Reason is Reason


@pytest.mark.parametrize("reason", ["", *(r.value for r in Reason)])
def test_the_history_takes_every_reason_code(reason: str) -> None:
    assert HistoryEntry(time=1.0, kind="action", reason=reason).reason == reason


def test_the_history_refuses_anything_else_naming_it() -> None:
    with pytest.raises(ValidationError, match="'Scaled' is not a reason code"):
        HistoryEntry(time=1.0, kind="action", reason="Scaled")


@pytest.mark.parametrize(
    ("reason", "refuses"),
    [
        (Reason.AT_MAX, True),  # the load asks for more than executors.max
        (Reason.SOURCE_PARTITION_BOUND, True),
        (Reason.BLOCKED_INEFFECTIVE, True),
        (Reason.NO_METRICS, True),  # cannot see the load
        (Reason.WITHIN_BAND, False),
        (Reason.COOLDOWN, False),  # waits, refuses nothing
        (Reason.SCALE_OUT, False),  # an action
    ],
)
def test_a_reason_says_whether_it_refuses(reason: Reason, refuses: bool) -> None:
    assert reason.refuses is refuses
