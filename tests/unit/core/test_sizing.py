"""One step out (controller/core/sizing.py::evident_overload): with the overload measured, one
action goes to the size needed; on weaker evidence ``safety.maxScaleUpFactor`` still bounds a
step. The reference job (factories): one executor processes about 10,000 records/s."""

from __future__ import annotations

from contracts.history import ScalingHistory
from contracts.policy import ScalingPolicySpec
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
