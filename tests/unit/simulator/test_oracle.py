"""The oracle on a tiny trace with a hand-computed answer."""

from __future__ import annotations

import pytest

from contracts.policy import ScalingPolicySpec
from contracts.trace import parse_trace
from controller.simulator.model import JobModel
from controller.simulator.oracle import solve

# 20,000 records/s for 2 s, then nothing until t=4: 40,000 records, one executor = 10,000/s.
TINY = parse_trace("t,input_rate\n0,20000\n2,0\n4,0\n")


def policy(lo: int, hi: int, slo: float) -> ScalingPolicySpec:
    return ScalingPolicySpec.model_validate(
        {"executors": {"min": lo, "max": hi}, "lag": {"sloSeconds": slo}}
    )


@pytest.mark.parametrize(
    ("lo", "hi", "slo", "executor_seconds", "violation"),
    [
        # 4 executor-seconds of work; the SLO lets it wait, e.g. 0,0,2,2 (all done by t=4)
        (0, 4, 2.0, 4.0, 0.0),
        # tighter SLO: half must be done by t=2, all by t=3: 0,2,2,0
        (0, 4, 1.0, 4.0, 0.0),
        # at least one executor each second: 1,1,1,1 is the cheapest and meets SLO 2 s
        (1, 4, 2.0, 4.0, 0.0),
        # one executor at most, SLO 1 s: 10,000 records still waiting at t=3 (1 s in violation)
        (1, 1, 1.0, 4.0, 1.0),
    ],
    ids=["slack", "tight-slo", "min-one", "infeasible"],
)
def test_oracle_tiny(lo: int, hi: int, slo: float, executor_seconds: float, violation: float):
    r = solve(TINY, JobModel(), policy(lo, hi, slo), duration=4.0)
    assert r.executor_seconds == pytest.approx(executor_seconds)
    assert r.slo_violation_seconds == pytest.approx(violation)
    assert r.backlog[-1] == pytest.approx(0.0)
    assert len(r.executors) == 4


def test_oracle_is_a_lower_bound_of_steady_load() -> None:
    # load 2 (20,000/s) for 60 s: two executors at full rate, nothing less can keep up
    trace = parse_trace("t,load\n0,2\n60,2\n")
    r = solve(trace, JobModel(), policy(1, 8, 30.0), duration=60.0)
    assert r.slo_violation_seconds == 0
    assert 2 * 60 - 30 <= r.executor_seconds <= 2 * 60
