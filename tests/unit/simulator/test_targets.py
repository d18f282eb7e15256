"""The benchmark's verdict functions on named cases."""

from __future__ import annotations

import pytest

from contracts.trace import parse_trace
from controller.simulator.loop import Sample
from controller.simulator.targets import (
    actions_target,
    burst_ends,
    cost_target,
    flips_target,
    lock_in_target,
    reference_clause,
    slo_target,
    verdict,
    why_missed,
)


@pytest.mark.parametrize(
    ("engine", "flink", "met"),
    [
        (0, 0, True),
        (5, 0, True),
        (6, 0, False),
        (0.3, 0.3, True),
        (10, 20, True),
        (11, 20, False),
        (0, 3, True),
    ],
    ids=[
        "both-clean",
        "floor-5s",
        "over-floor",
        "sub-second",
        "half",
        "over-half",
        "clean-vs-some",
    ],
)
def test_slo_target(engine: float, flink: float, met: bool) -> None:
    assert slo_target(engine, flink)[0] is met


@pytest.mark.parametrize(
    ("engine", "plus", "met"),
    [(125, 100, True), (126, 100, False), (90, 100, True), (0, 0, True), (5, 0, False)],
    ids=["at-limit", "over-limit", "cheaper", "both-zero", "zero-reference"],
)
def test_cost_target(engine: float, plus: float, met: bool) -> None:
    assert cost_target(engine, plus)[0] is met


@pytest.mark.parametrize(
    ("actions", "changes", "step", "met"),
    [
        (2, 2, True, True),
        (3, 2, True, False),
        (3, 2, False, None),
        (0, 0, True, True),
        (1, 0, True, False),
    ],
    ids=["one-each", "one-too-many", "not-a-step-change", "no-change-no-action", "needless"],
)
def test_actions_target(actions: int, changes: int, step: bool, met: bool | None) -> None:
    assert actions_target(actions, changes, step)[0] is met


@pytest.mark.parametrize(
    ("flips", "load_flips", "met"),
    [(0, 0, True), (1, 1, True), (2, 1, False)],
    ids=["none", "as-many", "more"],
)
def test_flips_target(flips: int, load_flips: int, met: bool) -> None:
    assert flips_target(flips, load_flips)[0] is met


def test_burst_ends_are_the_drops_of_the_load() -> None:
    trace = parse_trace("t,load\n0,1\n30,4\n60,1.5\n90,1.2\n120,3\n150,1\n200,1\n")
    # 4 -> 1.5 is a drop; 1.5 -> 1.2 is within one executor's capacity (noise), 3 -> 1 a drop
    assert burst_ends(trace, 10_000.0, 200.0) == [60.0, 150.0]


def lags(points: dict[float, float], until: float = 200.0) -> list[tuple[float, float]]:
    """Per-second lag samples, piecewise constant from the given points."""
    out, cur = [], 0.0
    for t in range(int(until) + 1):
        cur = points.get(float(t), cur)
        out.append((float(t), cur))
    return out


@pytest.mark.parametrize(
    ("points", "ends", "met"),
    [
        ({0: 5.0}, [60.0], True),  # under the SLO all along
        ({0: 40.0, 100: 10.0}, [60.0], True),  # back under 40 s after the drop (limit 60 s)
        ({0: 40.0, 121: 10.0}, [60.0], False),  # back under 61 s after: locked in
        ({0: 40.0}, [60.0], False),  # never back
        ({0: 40.0}, [180.0], None),  # the run ends before the deadline: not judged
        ({0: 40.0, 70: 5.0, 130: 50.0}, [60.0, 140.0], False),  # the second burst locks in
    ],
    ids=["never-over", "recovers", "too-late", "never", "not-judged", "second-burst"],
)
def test_lock_in_target(points: dict[float, float], ends: list[float], met: bool | None) -> None:
    got, figs = lock_in_target(lags(points), ends, 30.0, 60.0, 200.0)
    assert got is met, figs


def test_lock_in_figures_name_the_worst() -> None:
    _, figs = lock_in_target(lags({0: 40.0, 100: 10.0}), [60.0], 30.0, 60.0, 200.0)
    assert "40 s after the drop at 60 s" in figs


def _sample(t: float, executors: int, lag: float, reason: str = "") -> Sample:
    return Sample(t, 0.0, 0.0, 0.0, lag, executors, executors, 2, True, 0.0, "", reason)


def test_a_missed_target_says_which_decisions_were_in_force() -> None:
    engine = [
        _sample(0, 4, 1.0),  # before any decision: "start"
        _sample(1, 4, 40.0, "RepartitionStateBound"),
        _sample(2, 4, 40.0, "ActionInProgress"),
        _sample(3, 4, 1.0, "ScaleDownDeferred"),
        _sample(4, 4, 1.0),  # still ScaleDownDeferred
        _sample(5, 2, 1.0, "WithinBand"),
    ]
    plus = [_sample(t, 2, 1.0) for t in range(6)]
    cost = why_missed("exec-s <= 1.25x oracle-plus", engine, plus, slo=30.0)
    assert cost is not None
    assert cost.endswith("ScaleDownDeferred 40%, start 20%, RepartitionStateBound 20%")
    slo = why_missed("SLO viol <= 0.5x flink", engine, plus, slo=30.0)
    assert slo is not None and slo.endswith("RepartitionStateBound 50%, ActionInProgress 50%")
    lock = why_missed("no lock-in", engine, plus, slo=30.0)
    assert lock is not None and lock.endswith("RepartitionStateBound 50%, ActionInProgress 50%")
    assert why_missed("flips <= load flips", engine, plus, slo=30.0) is None


def test_a_missed_actions_target_lists_the_actions() -> None:
    engine = [
        _sample(0, 1, 1.0),
        Sample(60, 0.0, 0.0, 0.0, 1.0, 1, 3, 2, True, 0.0, "scale", "ScaleOut"),
        Sample(61, 0.0, 0.0, 0.0, 1.0, 1, 3, 2, True, 0.0, "hold", "Cooldown"),
        Sample(95, 0.0, 0.0, 0.0, 1.0, 3, 4, 4, True, 0.0, "restart", "RepartitionStateBound"),
    ]
    why = why_missed("actions/change <= 1", engine, [], slo=30.0)
    assert why == ("the engine's actions: ScaleOut at 60 s (scale to 3 executors); "
                   "RepartitionStateBound at 95 s (restart to 4 executors)")


@pytest.mark.parametrize(
    ("target", "reference", "says"),
    [
        ("no lock-in", (False, "worst 71 s after the drop at 180 s"), True),
        ("SLO viol <= 0.5x flink", (False, "128.0 s vs flink 210.5 s"), True),
        ("actions/change <= 1", (False, "3 / 2"), True),
        ("no lock-in", (True, "worst 0 s"), False),
        ("actions/change <= 1", (None, "not a step change"), False),
        ("exec-s <= 1.25x oracle-plus", (False, "1.30x"), False),
    ],
    ids=["lock-in", "slo", "actions", "reference-meets", "not-applicable", "cost-is-the-yardstick"],
)
def test_a_miss_oracle_plus_shares_is_said_to_be_out_of_reach(
    target: str, reference: tuple[bool | None, str], says: bool
) -> None:
    clause = reference_clause(target, reference)
    if not says:
        assert clause is None
        return
    assert clause is not None and reference[1] in clause
    assert clause.startswith("oracle-plus (clairvoyant) misses it too")


def test_verdict_judges_any_row_by_the_same_targets() -> None:
    """The same trace, policy and targets for oracle-plus's row as for the engine's: a burst
    whose lag stays over the SLO long after the drop is a lock-in for whichever row shows it."""
    from controller.simulator.cli import load_policy

    trace = parse_trace("t,load\n0,1\n30,4\n90,1\n300,1\n")
    row = {"duration_seconds": 300.0, "slo_violation_seconds": 0.0, "executor_seconds": 600.0,
           "scaling_actions": 1, "load_changes": 2, "direction_changes": 0,
           "load_direction_changes": 1}
    summaries = {"engine": row, "flink": row, "oracle-plus": {**row, "scaling_actions": 4}}
    late = lags({0: 1.0, 90: 80.0, 200: 1.0})
    policy = load_policy(None)
    got = verdict(summaries, late, trace, policy, 10_000.0, True, row="oracle-plus")
    assert got["no lock-in"][0] is False
    assert got["actions/change <= 1"] == (False, "4 / 2")
    assert verdict(summaries, late, trace, policy, 10_000.0, True)["actions/change <= 1"][0]

