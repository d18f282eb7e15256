"""Sizing (controller/core/sizing.py). One step out (evident_overload): with the overload
measured, one action goes to the size needed; on weaker evidence ``safety.maxScaleUpFactor``
still bounds a step. The lag budget decides the drain term (demand). The reference job
(factories): one executor processes about 10,000 records/s."""

from __future__ import annotations

import pytest

from contracts.history import ScalingHistory
from contracts.policy import ScalingPolicySpec
from contracts.reasons import Action, Reason
from controller.core import decide
from controller.core.capacity import CapacityModel
from controller.core.inputs import Inputs
from controller.core.sizing import ceiling, evident_overload
from tests.unit.core.factories import NOW, stateless_heavy

POLICY = ScalingPolicySpec()  # executors.max 8, growth x4 per action


def _x(**kw: float) -> tuple[Inputs, CapacityModel]:
    snap = stateless_heavy(**kw)
    model = CapacityModel.from_snapshot(snap, POLICY.lag.slo_seconds)
    assert model is not None
    return Inputs(snap, POLICY, ScalingHistory(), NOW), model


def test_an_evident_overload_goes_to_the_needed_size_in_one_action() -> None:
    """12,000 records/s arrive on one executor that processes less, 400,000 wait: measured
    arrival, a growing backlog, busy past utilization.high. The drain needs 8 executors; x4
    would stop at 4 and need a second restart."""
    x, model = _x(arrival=12_000, backlog=400_000, age=2)
    assert evident_overload(x, model)
    assert ceiling(x, model) == POLICY.executors.max
    d = decide(x.snapshot, POLICY, ScalingHistory(), NOW)
    assert d.target_executors == 8, d.message
    assert "growth x4" not in d.message


def test_a_draining_job_is_still_bounded_by_the_growth_factor() -> None:
    """The same pile, but the executor already processes more than arrives (the backlog
    shrinks): no evident overload, so one action grows at most x4."""
    x, model = _x(arrival=5_000, backlog=400_000, age=20)
    assert not evident_overload(x, model)
    assert ceiling(x, model) == 4


LAG_BUDGET = [
    # (name, arrival, backlog, age, drain within (s) or None, executors; None: a hold)
    # 12k/s on ~9.9k/s: even acting one evaluation later, the lag peaks at 7 s / 20 s, under the
    # 30 s SLO: the lag budget takes it (WithinLagBudget) until the next evaluation
    ("no backlog: the arrival alone, which the lag budget takes for now", 12_000, 0, 0, None, None),
    ("a backlog the lag budget absorbs adds no drain term", 12_000, 50_000, 10, None, None),
    ("far over capacity: the lag budget cannot wait, sized on the arrival", 25_000, 0, 0, None, 4),
    # clear = 200k / ~10k/s = 20 s; 20 + 12 s startup >= 30 s SLO: drain within
    # min(60, 30 - 12 - 14) = 4 s, never planned shorter than the 12 s startup
    ("an old backlog drains before the SLO, not within the catch-up", 12_000, 200_000, 14, 12, 4),
    # age 2 s but 400k records: 40 s at the current capacity, past the SLO; the overload is
    # evident (arrival measured, busy past high, the backlog growing), so the growth factor
    # does not apply and one restart reaches the 8 executors the drain needs
    ("a large young backlog drains within SLO - startup - age", 12_000, 400_000, 2, 16, 8),
]


@pytest.mark.parametrize(
    ("name", "arrival", "backlog", "age", "within", "executors"),
    LAG_BUDGET,
    ids=[c[0] for c in LAG_BUDGET],
)
def test_the_lag_budget_decides_the_drain(
    name: str, arrival: float, backlog: float, age: float, within: float | None, executors: int
) -> None:
    from controller.core.capacity import CapacityModel
    from controller.core.inputs import Inputs
    from controller.core.sizing import demand

    observed = stateless_heavy(arrival=arrival, backlog=backlog, age=age)
    pol = ScalingPolicySpec()
    model = CapacityModel.from_snapshot(observed, pol.lag.slo_seconds)
    assert model is not None
    d = demand(Inputs(observed, pol, ScalingHistory(), NOW), model)
    assert d.drain_within == within
    if within is None:
        assert d.required == arrival
    else:
        assert d.required > arrival + backlog / within  # plus what piles up during the startup
    decision = decide(observed, pol, ScalingHistory(), NOW)
    assert decision.target_executors == executors, decision.message


def test_an_unknown_backlog_still_allows_a_scale_out_on_the_arrival_alone() -> None:
    d = decide(
        stateless_heavy(arrival=12_000, backlog=None), ScalingPolicySpec(), ScalingHistory(), NOW
    )
    assert (d.action, d.reason, d.target_executors) == (Action.SCALE, Reason.SCALE_OUT, 2)
