"""``decide(snapshot, policy, history, now) -> Decision``: the pure decision engine."""

from __future__ import annotations

from controller.core.decision import Decision
from controller.core.history import ScalingHistory
from controller.core.policy import ScalingPolicySpec
from controller.core.reasons import Action, Reason
from controller.core.snapshot import MetricsSnapshot


def decide(
    snapshot: MetricsSnapshot, policy: ScalingPolicySpec, history: ScalingHistory, now: float
) -> Decision:
    """Placeholder until the engine lands: always holds."""
    return Decision(action=Action.HOLD, reason=Reason.NO_METRICS, message="engine not built yet")
