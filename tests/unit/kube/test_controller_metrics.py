"""The controller's metrics: every reconcile, decision and action series exists at 0 before it first
happens, so rate()/increase() count the first one (a counter that appears at 1 shows none)."""

from __future__ import annotations

from prometheus_client import generate_latest

from controller.core import Action, Reason
from controller.kube.controller_metrics import OUTCOMES, RESULTS, ControllerMetrics


def samples(m: ControllerMetrics) -> dict[str, float]:
    out = {}
    for line in generate_latest(m.registry).decode().splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def test_reconciles_decisions_and_actions_start_at_zero() -> None:
    got = samples(ControllerMetrics())
    for result in RESULTS:
        assert got[f'stream_autoscaler_controller_reconciles_total{{result="{result}"}}'] == 0
    for action in Action:
        for reason in Reason:
            key = (f'stream_autoscaler_controller_decisions_total{{action="{action}",'
                   f'reason="{reason}"}}')
            assert got[key] == 0.0
    for action in ("scale", "repartition", "recover"):
        assert got[f'stream_autoscaler_controller_action_seconds_count{{action="{action}"}}'] == 0
        for outcome in OUTCOMES:
            key = (f'stream_autoscaler_controller_actions_total{{action="{action}",'
                   f'outcome="{outcome}"}}')
            assert got[key] == 0.0
    assert not any('action="hold"' in k for k in got if "actions_total" in k)


def test_an_action_counts_and_times_once_it_ends() -> None:
    m = ControllerMetrics()
    m.action("repartition", "started", 0.0)
    m.action("repartition", "succeeded", 26.0)
    got = samples(m)
    assert got['stream_autoscaler_controller_actions_total{action="repartition",'
               'outcome="started"}'] == 1
    assert got['stream_autoscaler_controller_action_seconds_count{action="repartition"}'] == 1
    assert got['stream_autoscaler_controller_action_seconds_sum{action="repartition"}'] == 26.0


def test_a_graded_action_is_observed_and_a_shortfall_counted() -> None:
    from contracts.history import HistoryEntry
    from controller.core import Decision

    m = ControllerMetrics()
    assert samples(m)["stream_autoscaler_controller_action_shortfalls_total"] == 0
    for achieved in (90_000.0, 40_000.0):  # 90% and 40% of a 100,000 records/s prediction
        g = HistoryEntry(time=1.0, kind="grade", reason="ScaleOut", executors=4,
                         expected_rate=100_000.0, achieved_rate=achieved, graded_time=0.0)
        m.decision(Decision(action=Action.HOLD, reason=Reason.WITHIN_BAND, message="", grade=g))
    got = samples(m)
    assert got["stream_autoscaler_controller_action_achieved_ratio_count"] == 2
    assert got['stream_autoscaler_controller_action_achieved_ratio_bucket{le="0.5"}'] == 1
    assert got["stream_autoscaler_controller_action_shortfalls_total"] == 1


def test_a_graded_recommendation_is_counted_by_verdict_not_as_an_action() -> None:
    """In mode: recommend the grade judges a scale-out not carried out: it counts by verdict
    and never as an action's achieved ratio (the job's rate against a layout it never ran)."""
    from contracts.history import HistoryEntry
    from contracts.policy import ScalingPolicySpec
    from controller.core import Decision

    policy = ScalingPolicySpec.model_validate({"mode": "recommend"})
    m = ControllerMetrics()
    assert samples(m)['stream_autoscaler_controller_recommendations_graded_total'
                      '{verdict="needed"}'] == 0
    for age in (45.0, 1.0):  # behind the 30 s SLO, then keeping up
        g = HistoryEntry(time=1.0, kind="grade", action="recommendation", reason="ScaleOut",
                         executors=4, expected_rate=40_000.0, achieved_rate=10_000.0,
                         backlog_age_seconds=age, graded_time=0.0)
        m.decision(Decision(action=Action.HOLD, reason=Reason.WITHIN_BAND, message="", grade=g),
                   policy)
    got = samples(m)
    assert got['stream_autoscaler_controller_recommendations_graded_total'
               '{verdict="needed"}'] == 1
    assert got['stream_autoscaler_controller_recommendations_graded_total'
               '{verdict="not_needed"}'] == 1
    assert got["stream_autoscaler_controller_action_achieved_ratio_count"] == 0
