"""The pure core of stream-autoscaler: metrics snapshot, capacity, diagnosis and decisions.

Imports only the standard library, pydantic and :mod:`contracts` (the models it decides on);
an import-linter contract and a test enforce it, so it runs the same in the Kubernetes
controller, the local loop and the simulator. See docs/architecture.md.
"""

from controller.core.decision import Decision, Diagnosis, Sizing, record
from controller.core.engine import decide
from controller.core.reasons import Action, BottleneckKind, Reason
from controller.core.snapshot import MetricsSnapshot, StageMetrics

__all__ = [
    "Action",
    "BottleneckKind",
    "Decision",
    "Diagnosis",
    "MetricsSnapshot",
    "Reason",
    "Sizing",
    "StageMetrics",
    "decide",
    "record",
]
