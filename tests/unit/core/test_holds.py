"""The holds that let a scale-out wait (controller/core/holds.py), by name; the keeping-up
cases are in test_engine.py's guard table, the lag budget's drain in test_sizing.py. The
reference job (factories): one executor processes about 10,000 records/s."""

from __future__ import annotations

import pytest

from contracts.history import ScalingHistory
from contracts.policy import ScalingPolicySpec
from contracts.reasons import Action, Reason
from controller.core import decide
from tests.unit.core.factories import NOW, stateless_heavy

STEP_IN_SPAN = [
    # (name, measured arrival, backlog, its age (s), executors; None: held for the next evaluation)
    # 25k/s on ~9.9k/s: far over capacity, sized now (the lag-budget table's third case)
    ("a backlog that arrived at the measured rate: sized now", 25_000, 37_500, 1.5, 4),
    # 120k records in 1.5 s = 80k/s, 3.2x the measured rate: a step the rate still averages in;
    # they clear in ~12 s, under the SLO with the startup, so the lag budget takes a wait
    ("a step inside the arrival's span: sized once the rate covers the new load", 25_000,
     120_000, 1.5, None),
    # the same pile 10 s old is past lag.backlogToleranceSeconds: not a fresh step's, sized now
    ("an old backlog says nothing about the last seconds", 25_000, 120_000, 10, 4),
    # 400k in 2 s: 40 s to clear, past the SLO: a pile that must drain is sized now (8)
    ("a pile that must drain now is sized now, step or not", 12_000, 400_000, 2, 8),
]


@pytest.mark.parametrize(
    ("name", "arrival", "backlog", "age", "executors"),
    STEP_IN_SPAN,
    ids=[c[0] for c in STEP_IN_SPAN],
)
def test_a_step_inside_the_arrivals_span_is_sized_one_evaluation_later(
    name: str, arrival: float, backlog: float, age: float, executors: int | None
) -> None:
    """holds.step_in_span: sized on a rate that still averages in the load before a step, or on
    the backlog's rate over a second or two, a restart is followed by a second one (a 10x step
    held: 96 and 255 s over the SLO, against 25 s when sized one evaluation later)."""
    d = decide(stateless_heavy(arrival=arrival, backlog=backlog, age=age), ScalingPolicySpec(),
               ScalingHistory(), NOW)
    if executors is None:
        assert (d.action, d.reason) == (Action.HOLD, Reason.INSUFFICIENT_DATA), d.message
        assert "a step the measured rate still averages in" in d.message
    else:
        assert d.target_executors == executors, d.message
        assert d.reason is not Reason.INSUFFICIENT_DATA, d.message
