"""The stateful stage runs on the executors holding its state.

Stateful tasks stick to the executors with their state store (docs/spark-facts.md): executors
added in place take none of them until a restart spreads the state. The holders come from the
recorded actions (``state_holders``); the capacity model gives the stateful stage their slots
only, so a job scaled out in place whose state stage binds is restarted to spread its state,
not told it is within the band."""

from __future__ import annotations

import pytest

from contracts.history import HistoryEntry, ScalingHistory
from controller.core import Action, Reason
from controller.core.capacity import CapacityModel, Layout, state_holders
from tests.unit.core.factories import NOW, Case, check, state_heavy


def _act(ago: float, action: str, executors: int, before: int | None = None) -> HistoryEntry:
    return HistoryEntry(time=NOW - ago, kind="action", action=action, executors=executors,
                        executors_before=before, reason="ScaleOut")  # fmt: skip


HOLDERS = [
    ("no action on record: unknown", (), 4, None),
    ("a restart spreads state over the executors it starts with",
     (_act(100, "repartition", 3, 1),), 3, 3),
    ("a recovery is a restart too", (_act(100, "recover", 5, 2),), 5, 5),
    ("an in-place scale-out adds no holder",
     (_act(200, "repartition", 2, 1), _act(100, "scale", 4, 2)), 4, 2),
    ("before any restart on record, the state is where the first in-place move started",
     (_act(100, "scale", 4, 2),), 4, 2),
    ("an in-place scale-in moves state onto the executors left",
     (_act(300, "repartition", 4, 2), _act(200, "scale", 2, 4), _act(100, "scale", 4, 2)), 4, 2),
    ("a lost executor's state moves to those left: never more holders than executors",
     (_act(100, "repartition", 4, 2),), 3, 3),
    ("an in-place move without its start size tells nothing", (_act(100, "scale", 4),), 4, None),
    ("recommendations and blocks are not actions",
     (HistoryEntry(time=NOW - 50, kind="recommendation", executors=6),
      HistoryEntry(time=NOW - 40, kind="blocked", executors=6, until=NOW + 60)), 4, None),
]  # fmt: skip


@pytest.mark.parametrize(("entries", "executors", "expected"),
                         [h[1:] for h in HOLDERS], ids=[h[0] for h in HOLDERS])  # fmt: skip
def test_state_holders(entries: tuple[HistoryEntry, ...], executors: int,
                       expected: int | None) -> None:  # fmt: skip
    assert state_holders(ScalingHistory(entries=entries), executors) == expected


def test_executors_added_in_place_give_the_stateful_stage_no_slot() -> None:
    s = state_heavy(arrival=12_000, executors=4, partitions=4)
    spread = CapacityModel.from_snapshot(s, 30.0)
    held = CapacityModel.from_snapshot(s, 30.0, state_executors=2)
    assert spread is not None and held is not None
    in_place, restart = Layout(4, 4, restart=False), Layout(4, 4, restart=True)
    # 4 state tasks in two waves on the 2 holders: about half the capacity in place
    assert held.capacity(in_place) < 0.6 * spread.capacity(in_place)
    # a restart spreads the state: the holders no longer matter
    assert held.capacity(restart) == pytest.approx(spread.capacity(restart))
    assert held.spreads_state(restart) and not spread.spreads_state(restart)


SCALED_IN_PLACE = ScalingHistory(entries=(_act(200, "scale", 4, 2),))

CASES = [
    Case(
        "executors added in place hold no state: a stateful bottleneck restarts to spread it "
        "over them, at the same partitions",
        state_heavy(arrival=12_000, executors=4, partitions=4, backlog=50_000, age=12),
        (Action.REPARTITION, Reason.REPARTITION_OUT, 4, 4),
        history=SCALED_IN_PLACE,
        message_has="2 hold it",
    ),
    Case(
        "the same job with its state spread over all four is within the band",
        state_heavy(arrival=12_000, executors=4, partitions=4, backlog=50_000, age=12),
        (Action.HOLD, Reason.WITHIN_BAND, None, None),
    ),
    Case(
        "a spreading restart the lag budget can wait for is held, and says what it waits for",
        state_heavy(arrival=12_000, executors=4, partitions=4),
        (Action.HOLD, Reason.WITHIN_LAG_BUDGET, None, None),
        history=SCALED_IN_PLACE,
        message_has="a restart that spreads state over all 4",
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_decide(case: Case) -> None:
    check(case)
