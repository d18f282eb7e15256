"""The pure core of stream-autoscaler: models, metrics snapshot, diagnosis and decisions.

Imports only the standard library and pydantic (a test enforces it), so it runs the same in the
Kubernetes controller, the local demo and the simulator.
"""

from controller.core.decision import Decision, Diagnosis, Sizing, record
from controller.core.engine import decide
from controller.core.history import HistoryEntry, HistoryLimits, ScalingHistory
from controller.core.policy import ScalingPolicy, ScalingPolicySpec
from controller.core.reasons import Action, BottleneckKind, Reason
from controller.core.snapshot import MetricsSnapshot, StageMetrics
from controller.core.streamjob import StreamJob, StreamJobSpec, StreamJobStatus
from controller.core.trace import Trace, TraceError, load_trace, parse_trace

__all__ = [
    "Action",
    "BottleneckKind",
    "Decision",
    "Diagnosis",
    "HistoryEntry",
    "HistoryLimits",
    "MetricsSnapshot",
    "Reason",
    "ScalingHistory",
    "ScalingPolicy",
    "ScalingPolicySpec",
    "Sizing",
    "StageMetrics",
    "StreamJob",
    "StreamJobSpec",
    "StreamJobStatus",
    "Trace",
    "TraceError",
    "decide",
    "load_trace",
    "parse_trace",
    "record",
]
