"""evaluate(): the step every host runs — collect -> decide -> record, then acted or not.

Table rows grouped policy / world (what the metrics say, what the actuator does) / expected
(the decision, whether it was carried out, the history kinds it leaves). The host below is the
local loop's, reduced to what the step asks of a host: act only when the decision ``acts``,
``carried_out()`` on success, ``refused()`` on an error.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from contracts.history import HistoryLimits, ScalingHistory
from contracts.policy import ScalingPolicySpec
from controller.core import (
    Action,
    Decision,
    Evaluation,
    MetricsSnapshot,
    Reason,
    decide,
    evaluate,
    log_fields,
    record,
)
from controller.core.taskcost import UNLEARNED as COST_UNLEARNED
from controller.core.taskcost import samples as cost_samples
from tests.unit.core.factories import NOW, snapshot

LOADED = snapshot(arrival=40_000, executors=2, partitions=2, backlog=100_000, age=10)
"""Scales out in place when repartition is off (test_engine: "repartition disabled")."""
NO_REPARTITION = ScalingPolicySpec.model_validate({"partitions": {"repartition": False}})
RECOMMEND = NO_REPARTITION.model_copy(update={"mode": "recommend"})
DEAD = MetricsSnapshot(job="wordcount", unavailable="Prometheus at http://x: ConnectionError")


class Refused(Exception):
    pass


@dataclass(frozen=True)
class Case:
    id: str
    # policy
    policy: ScalingPolicySpec
    # world
    observed: MetricsSnapshot
    actuator_refuses: bool = False
    # expected
    action: Action = Action.HOLD
    reason: Reason = Reason.WITHIN_BAND
    applied: bool = False
    acted: bool = False
    kinds: tuple[str, ...] = ()
    error_has: str = ""
    limits: HistoryLimits = field(default_factory=HistoryLimits)


CASES = [
    Case(
        "acted: the action enters the history after its recommendation",
        NO_REPARTITION,
        LOADED,
        action=Action.SCALE,
        reason=Reason.SCALE_OUT,
        applied=True,
        acted=True,
        kinds=("recommendation", "action"),
    ),
    Case(
        "refused by the actuator: not remembered as done, the error kept",
        NO_REPARTITION,
        LOADED,
        actuator_refuses=True,
        action=Action.SCALE,
        reason=Reason.SCALE_OUT,
        applied=True,
        kinds=("recommendation",),
        error_has="409 Repartitioning",
    ),
    Case(
        "recommend mode: decided, never applied, recommendation recorded",
        RECOMMEND,
        LOADED,
        action=Action.SCALE,
        reason=Reason.SCALE_OUT,
        kinds=("recommendation",),
    ),
    Case(
        "unknown metrics: a hold, nothing applied, nothing to record",
        NO_REPARTITION,
        DEAD,
        reason=Reason.NO_METRICS,
        kinds=(),
    ),
    Case(
        "bounded history: the status limits apply to what is recorded",
        NO_REPARTITION,
        LOADED,
        action=Action.SCALE,
        reason=Reason.SCALE_OUT,
        applied=True,
        acted=True,
        kinds=("action",),
        limits=HistoryLimits(max_entries=1),
    ),
]


def _host(case: Case, collected: list[tuple[float, float]]) -> tuple[Evaluation, list[Decision]]:
    applied: list[Decision] = []

    def collect(window_seconds: float, now: float) -> MetricsSnapshot:
        collected.append((window_seconds, now))
        return case.observed

    ev = evaluate(collect, case.policy, ScalingHistory(), NOW, case.limits)
    if ev.decision.acts:
        applied.append(ev.decision)
        try:
            if case.actuator_refuses:
                raise Refused("409 Repartitioning")
            ev = ev.carried_out()
        except Refused as e:
            ev = ev.refused(f"{type(e).__name__}: {e}")
    return ev, applied


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_evaluate(case: Case) -> None:
    collected: list[tuple[float, float]] = []
    ev, applied = _host(case, collected)
    assert collected == [(case.policy.timing.window_seconds, NOW)]  # the policy's window, once
    assert (ev.decision.action, ev.decision.reason) == (case.action, case.reason)
    assert bool(applied) == case.applied and ev.acted == case.acted
    assert tuple(e.kind for e in ev.history.entries) == case.kinds
    assert case.error_has in (ev.error or "") and (ev.error is None) == (not case.error_has)
    assert ev.time == NOW and ev.snapshot is case.observed


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_evaluate_records_what_record_does(case: Case) -> None:
    """The step's history equals ``record`` of the decision as carried out (or not), plus the
    window's task costs."""
    ev, _ = _host(case, [])
    d = decide(case.observed, case.policy, ScalingHistory(), NOW)
    done = d if ev.acted else d.model_copy(update={"enforced": False})
    expected = record(
        ScalingHistory(), done, NOW, rate_before=case.observed.processed_rate,
        executors_before=case.observed.executors,
        backlog_age=case.observed.backlog_age_seconds, limits=case.limits,
    )
    assert ev.history.entries == expected.entries
    learned = ev.decision.reason not in COST_UNLEARNED
    assert ev.history.costs == (cost_samples(case.observed, NOW) if learned else ())


def test_log_fields_explain_the_decision() -> None:
    ev, _ = _host(CASES[0], [])
    fields = log_fields(ev)
    assert fields["reason"] == "ScaleOut" and fields["action"] == "scale"
    assert fields["message"] == ev.decision.message and fields["enforced"] is True
    assert set(fields) == {
        "action",
        "reason",
        "message",
        "target_executors",
        "target_partitions",
        "enforced",
        "bottleneck",
        "operator",
        "evidence",
    }


def test_a_window_in_the_cooldown_after_an_action_teaches_no_task_cost() -> None:
    """Right after an action the window mixes two layouts: its costs are not kept (the fixed
    cost per task is fitted from windows that describe one layout, controller.core.taskcost)."""
    policy = ScalingPolicySpec()
    acted = evaluate(lambda w, now: LOADED, policy, ScalingHistory(), NOW).carried_out()
    assert acted.acted and acted.history.costs == cost_samples(LOADED, NOW) != ()
    later = evaluate(lambda w, now: LOADED, policy, ScalingHistory(entries=acted.history.entries),
                     NOW + 5)  # fmt: skip
    assert later.decision.reason in COST_UNLEARNED, later.decision.reason
    assert later.history.costs == ()
