"""Reason codes: the vocabulary every decision explains itself in, declared with the API types.

The same code appears in structured logs, Kubernetes Events, ``status.lastDecision.reason``,
the history in status and the condition reasons, so they are CamelCase like Kubernetes reasons.
The engine (``controller/core``) decides with them; the history (:mod:`contracts.history`)
stores them typed; the reconciler asks a reason whether it refuses a change
(:attr:`Reason.refuses`) instead of keeping its own list.
"""

from __future__ import annotations

from enum import StrEnum


class Action(StrEnum):
    """What a decision asks the job to do."""

    HOLD = "hold"
    """Change nothing."""
    SCALE = "scale"
    """Change the executor count of the running query in place."""
    REPARTITION = "repartition"
    """Stop at a batch boundary, repartition state from the checkpoint (and set executors),
    resume: the SEEP move for a stateful bottleneck."""
    RECOVER = "recover"
    """Restart a failed job from its latest checkpoint with enough capacity to catch up."""


RESTARTING_ACTIONS = frozenset({Action.REPARTITION.value, Action.RECOVER.value})
"""Actions (as recorded in the history) that stop the query and start it again: a window taken
soon after them still describes the old layout, and the state spreads over the executors they
start with."""


class BottleneckKind(StrEnum):
    """Why a stage limits the job."""

    NONE = "None"
    TASK_SLOTS = "TaskSlots"
    """Too few task slots: more executors help."""
    STATE_PARTITIONS = "StatePartitions"
    """The stateful stage has as many slots as partitions: only a repartition helps."""
    SOURCE_PARTITIONS = "SourcePartitions"
    """The read stage has as many slots as source partitions: more source partitions help."""
    DRIVER_OVERHEAD = "DriverOverhead"
    """Fixed per-batch driver time dominates: a longer trigger helps, executors do not."""
    SKEW = "Skew"
    """One task is much longer than the median: more slots barely help."""
    MEMORY = "Memory"
    """Executors are short of memory."""
    FAILURE = "Failure"
    """The driver is down or makes no progress."""


class Reason(StrEnum):
    """Why the engine decided what it did."""

    # holds because of what is known
    NO_METRICS = "NoMetrics"
    STALE_METRICS = "StaleMetrics"
    INSUFFICIENT_DATA = "InsufficientData"
    COOLDOWN = "Cooldown"
    WITHIN_BAND = "WithinBand"
    SCALE_DOWN_DEFERRED = "ScaleDownDeferred"
    CATCHING_UP = "CatchingUp"
    WITHIN_LAG_BUDGET = "WithinLagBudget"
    AT_MAX = "AtMaxCapacity"
    AT_MIN = "AtMinCapacity"
    BLOCKED_INEFFECTIVE = "BlockedIneffective"
    SOURCE_PARTITION_BOUND = "SourcePartitionBound"
    DRIVER_OVERHEAD_BOUND = "DriverOverheadBound"
    SKEWED = "Skewed"
    PARTITION_BOUND_NO_REPARTITION = "PartitionBoundRepartitionDisabled"
    ACTION_IN_PROGRESS = "ActionInProgress"
    MEMORY_PRESSURE = "MemoryPressure"
    """Executor memory is short: no scale-in (fewer executors would each hold more), and at
    executors.max only more memory per executor helps."""
    # actions
    SCALE_OUT = "ScaleOut"
    SCALE_IN = "ScaleIn"
    REPARTITION_OUT = "RepartitionStateBound"
    RECOVER_FAILURE = "RecoverFromFailure"
    EXECUTORS_LOST = "ExecutorsLost"
    """Executors were lost with their node (the runner removed them so that Spark replaces
    them): capacity sized to drain what piled up, and no sizing on the batches the loss slowed
    (:mod:`controller.core.lost_executors`)."""
    SCALE_OUT_MEMORY = "ScaleOutForMemory"
    """More executors so the memory in use spreads below the target utilization."""
    ANTICIPATED_BURST = "AnticipatedBurst"
    """Executors added ahead of a burst the job's own history predicts (its past bursts came at
    a regular period): they are up before it arrives (:mod:`controller.core.anticipation`)."""
    ADMISSION_CAP_BOUND = "AdmissionCapBound"
    """The admission cap the query started with binds (its batches read all of it, end early,
    and the job falls behind): restart at the same layout with a larger one
    (:mod:`controller.core.caplift`)."""

    @property
    def refuses(self) -> bool:
        """A hold that refuses a change the load asks for, or cannot see the load: the
        Kubernetes controller emits a Warning Event when one starts, so a refusal shows in
        ``kubectl describe`` and not only in logs
        (``tests/unit/contracts/test_reasons.py``)."""
        return self in _REFUSING


_REFUSING = frozenset({
    Reason.AT_MAX,
    Reason.BLOCKED_INEFFECTIVE,
    Reason.SOURCE_PARTITION_BOUND,
    Reason.DRIVER_OVERHEAD_BOUND,
    Reason.SKEWED,
    Reason.MEMORY_PRESSURE,
    Reason.PARTITION_BOUND_NO_REPARTITION,
    Reason.NO_METRICS,
    Reason.STALE_METRICS,
})  # fmt: skip
