"""What one ``decide`` call sees, grouped so each step of the pipeline takes one argument.

Every step module (:mod:`~controller.core.failure`, :mod:`~controller.core.sizing`,
:mod:`~controller.core.guards`) reads its inputs from :class:`Inputs` and ends a decision with
:meth:`Inputs.hold` when it says no.
"""

from __future__ import annotations

from dataclasses import dataclass

from contracts.history import ScalingHistory
from contracts.policy import ScalingPolicySpec
from controller.core.decision import Decision, Diagnosis
from controller.core.reasons import Action, Reason
from controller.core.snapshot import MetricsSnapshot


@dataclass(frozen=True)
class Inputs:
    """The arguments of ``decide``: what was seen, the policy, what was done before, and when."""

    snapshot: MetricsSnapshot
    policy: ScalingPolicySpec
    history: ScalingHistory
    now: float

    @property
    def enforced(self) -> bool:
        return self.policy.mode == "enforce"

    def hold(
        self, reason: Reason, message: str, diagnosis: Diagnosis | None = None, **kw: object
    ) -> Decision:
        return Decision(
            action=Action.HOLD,
            reason=reason,
            message=message,
            enforced=self.enforced,
            diagnosis=diagnosis or Diagnosis(),
            **kw,
        )
