"""decide() around the cooldown (controller/core/cooldown.py): when the last action holds the
next one back, and the two exceptions — load that outgrew the last scale-out, and a scale-in
whose load came back (or whose lag grows) — against a scale-in's own transient."""

from __future__ import annotations

import pytest

from contracts.history import HistoryEntry, ScalingHistory
from controller.core import Action, Reason
from tests.unit.core.factories import NOW, Case, check, history, stateless_heavy

HOLD, SCALE, REPART = Action.HOLD, Action.SCALE, Action.REPARTITION

COOLDOWN_CASES = [
    Case(
        "cooldown after an action holds a scale-out",
        stateless_heavy(arrival=20_000, backlog=50_000, age=10),
        (HOLD, Reason.COOLDOWN, None, None),
        history=history((10, "action", 1)),
    ),
    Case(
        "load that outgrew the last scale-out's sizing scales out within its cooldown",
        stateless_heavy(arrival=30_000, executors=2, backlog=100_000, age=20),
        (REPART, Reason.REPARTITION_OUT, 8, 8),
        history=ScalingHistory(
            entries=(
                HistoryEntry(time=NOW - 10, kind="action", action="scale", executors=2,
                             reason="ScaleOut", rate_before=4_000, expected_rate=19_000),
            )
        ),
    ),
    Case(
        "load within the last scale-out's sizing waits out its cooldown",
        stateless_heavy(arrival=30_000, executors=2, backlog=100_000, age=20),
        (HOLD, Reason.COOLDOWN, None, None),
        history=ScalingHistory(
            entries=(
                HistoryEntry(time=NOW - 10, kind="action", action="scale", executors=2,
                             reason="ScaleOut", rate_before=4_000, expected_rate=38_000),
            )
        ),
    ),
    Case(
        "a scale-in does not hold back a scale-out (no cooldown after it)",
        stateless_heavy(arrival=20_000, backlog=50_000, age=10),
        (SCALE, Reason.SCALE_OUT, 4, None),
        history=ScalingHistory(
            entries=(
                HistoryEntry(
                    time=NOW - 10, kind="action", action="scale", executors=1, reason="ScaleIn"
                ),
            )
        ),
    ),
    Case(
        "a scale-in's own transient at the same load and no lag does not undo it",
        stateless_heavy(arrival=40_000, executors=2, backlog=20_000, age=1),
        (HOLD, Reason.COOLDOWN, None, None),
        history=ScalingHistory(
            entries=(
                HistoryEntry(time=NOW - 26, kind="action", action="scale", executors=2,
                             reason="ScaleIn", rate_before=40_000),
            )
        ),
        message_has="has not come back",
    ),
    Case(
        "after a scale-in settled (cooldown and one window), the same reading scales out",
        stateless_heavy(arrival=40_000, executors=2, backlog=20_000, age=1),
        (SCALE, Reason.SCALE_OUT, 8, None),
        history=ScalingHistory(
            entries=(
                HistoryEntry(time=NOW - 61, kind="action", action="scale", executors=2,
                             reason="ScaleIn", rate_before=40_000),
            )
        ),
    ),
    Case(
        "load that came back right after a scale-in scales out at once",
        stateless_heavy(arrival=48_000, executors=2, backlog=20_000, age=1),
        (REPART, Reason.REPARTITION_OUT, 8, 8),
        history=ScalingHistory(
            entries=(
                HistoryEntry(time=NOW - 26, kind="action", action="scale", executors=2,
                             reason="ScaleIn", rate_before=40_000),
            )
        ),
    ),
]


@pytest.mark.parametrize("case", COOLDOWN_CASES, ids=[c.id for c in COOLDOWN_CASES])
def test_cooldown(case: Case) -> None:
    check(case)
