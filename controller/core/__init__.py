"""The pure core of stream-autoscaler: metrics snapshot, capacity, diagnosis and decisions.

Imports only the standard library, pydantic and :mod:`contracts` (the models it decides on);
an import-linter contract and a test enforce it, so it runs the same in the Kubernetes
controller, the local loop and the simulator. See docs/architecture.md.

``decide`` (:mod:`~controller.core.engine`) is the pipeline; ``evaluate``
(:mod:`~controller.core.evaluate`) is the step every host runs around it: collect -> decide ->
record, then the action carried out or not.
"""

from controller.core.decision import (
    Decision,
    Diagnosis,
    Sizing,
    action_entry,
    record,
    record_recommendation,
)
from controller.core.engine import decide
from controller.core.evaluate import Collect, Evaluation, evaluate, log_fields
from controller.core.reasons import Action, BottleneckKind, Reason
from controller.core.snapshot import MetricsSnapshot, StageMetrics

__all__ = [
    "Action",
    "BottleneckKind",
    "Collect",
    "Decision",
    "Diagnosis",
    "Evaluation",
    "MetricsSnapshot",
    "Reason",
    "Sizing",
    "StageMetrics",
    "action_entry",
    "decide",
    "evaluate",
    "log_fields",
    "record",
    "record_recommendation",
]
