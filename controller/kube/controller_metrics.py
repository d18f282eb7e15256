"""The controller's own Prometheus metrics (``stream_autoscaler_controller_*``).

Usage::

    m = ControllerMetrics()            # its own registry; serve it with m.serve(port)
    m.decision(decision, policy); m.action("scale", "succeeded", 12.5); m.evaluated(0.004)
"""

from __future__ import annotations

from typing import get_args

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from contracts.policy import ScalingPolicySpec
from controller.core import Action, Decision, Reason
from controller.core.grading import (
    RECOMMENDED,
    SHORTFALL_SHARE,
    RecommendationVerdict,
    recommendation_verdict,
)

P = "stream_autoscaler_controller_"
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
ACTION_BUCKETS = (1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0)
RATIO_BUCKETS = (0.25, 0.5, SHORTFALL_SHARE, 0.8, 0.9, 1.0, 1.1, 1.25, 1.5, 2.0)
RESULTS = ("ok", "conflict", "error")
"""How a reconcile pass ends (a 409 conflict is retried)."""
OUTCOMES = ("started", "refused", "succeeded", "failed", "abandoned")
"""How an action ends (``started`` when its intent is written; ``accepted`` is not timed)."""


class ControllerMetrics:
    """Reconciles, decisions by reason, action latency, errors, the queue and leadership."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        r = self.registry = registry or CollectorRegistry()
        self.reconciles = Counter(P + "reconciles_total", "Reconcile passes by result.",
                                  ["result"], registry=r)
        self.decisions = Counter(P + "decisions_total", "Decisions by action and reason.",
                                 ["action", "reason"], registry=r)
        self.actions = Counter(P + "actions_total", "Actions by kind and outcome.",
                               ["action", "outcome"], registry=r)
        self.action_seconds = Histogram(P + "action_seconds",
                                        "Action latency: intent written to outcome known (s).",
                                        ["action"], buckets=ACTION_BUCKETS, registry=r)
        self.evaluation_seconds = Histogram(P + "evaluation_seconds",
                                            "One evaluation: collect, decide, write status (s).",
                                            buckets=LATENCY_BUCKETS, registry=r)
        self.errors = Counter(P + "errors_total", "Errors by kind.", ["kind"], registry=r)
        self.events = Counter(P + "events_total", "Kubernetes Events emitted.",
                              ["type", "reason"], registry=r)
        self.queue_depth = Gauge(P + "queue_depth", "Keys ready in the work queue.", registry=r)
        self.jobs = Gauge(P + "jobs", "StreamJobs in the cache.", registry=r)
        self.leader = Gauge(P + "leader", "1 while this instance holds the Lease.", registry=r)
        self.achieved = Histogram(P + "action_achieved_ratio",
                                  "Achieved over predicted capacity of each graded action.",
                                  buckets=RATIO_BUCKETS, registry=r)
        self.shortfalls = Counter(P + "action_shortfalls_total",
                                  "Graded actions that delivered under the shortfall share.",
                                  registry=r)
        self.recommendations_graded = Counter(
            P + "recommendations_graded_total",
            "Scale-outs recommended and not carried out (mode: recommend), graded by what the "
            "job did without them: needed (it fell behind its SLO), behind (within it), "
            "not_needed (it kept up).", ["verdict"], registry=r)
        self.watch_restarts = Counter(P + "watch_restarts_total",
                                      "Watches restarted, by kind and why (expired = 410 Gone).",
                                      ["kind", "reason"], registry=r)
        self._start_at_zero()

    def _start_at_zero(self) -> None:
        """Exports every reconcile, decision and action series at 0 from the start: a counter
        that first appears at 1 shows no increase to ``rate()``/``increase()``, so a job's one
        repartition, or the first error, would be missing from the dashboard
        (helm/stream-autoscaler/dashboards/)."""
        for result in RESULTS:
            self.reconciles.labels(result)
        for action in Action:
            for reason in Reason:
                self.decisions.labels(action.value, reason.value)
            if action is Action.HOLD:
                continue
            self.action_seconds.labels(action.value)
            for outcome in OUTCOMES:
                self.actions.labels(action.value, outcome)
        for verdict in get_args(RecommendationVerdict):
            self.recommendations_graded.labels(verdict)

    def decision(self, d: Decision, policy: ScalingPolicySpec | None = None) -> None:
        self.decisions.labels(d.action.value, d.reason.value).inc()
        g = d.grade
        if g is not None and g.action == RECOMMENDED:
            if policy is not None:
                self.recommendations_graded.labels(recommendation_verdict(policy, g)).inc()
            return
        if g is not None and g.expected_rate and g.achieved_rate is not None:
            ratio = g.achieved_rate / g.expected_rate
            self.achieved.observe(ratio)
            if ratio < SHORTFALL_SHARE:
                self.shortfalls.inc()

    def action(self, action: str, outcome: str, seconds: float) -> None:
        self.actions.labels(action, outcome).inc()
        if outcome not in ("started", "accepted"):
            self.action_seconds.labels(action).observe(seconds)

    def evaluated(self, seconds: float) -> None:
        self.evaluation_seconds.observe(seconds)

    def error(self, kind: str) -> None:
        self.errors.labels(kind).inc()

    def event(self, type_: str, reason: str) -> None:
        self.events.labels(type_, reason).inc()

    def serve(self, port: int, addr: str = "0.0.0.0") -> None:
        start_http_server(port, addr=addr, registry=self.registry)
