"""The ScalingPolicy model: every threshold and timeout of the decision engine, in one place.

A policy is the same YAML in ``policies/*.yaml`` and as a ``ScalingPolicy`` object in a cluster.
Each field says its unit and why its default is what it is; cross-field rules are checked here
(and mirrored as CEL rules in the generated CRD).
"""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field, model_validator

from contracts.api import ObjectMeta, SpecModel, cel


class ExecutorBounds(SpecModel):
    """How many executors the engine may ask for."""

    model_config = ConfigDict(
        json_schema_extra=cel(
            ("self.min <= self.max", "min must be <= max"),
            (
                "!has(self.initial) || (self.min <= self.initial && self.initial <= self.max)",
                "initial must be within [min, max]",
            ),
        )
    )

    min: int = Field(
        default=1, ge=0, le=1000, description="Fewest executors (count). 0 allows scale-to-zero."
    )
    max: int = Field(
        default=8, ge=1, le=1000, description="Most executors (count); the cost ceiling."
    )
    initial: int | None = Field(
        default=None,
        ge=0,
        le=1000,
        description="Executors at start (count). Default: min (or the job's own count if within "
        "bounds).",
    )

    @model_validator(mode="after")
    def _bounds(self) -> ExecutorBounds:
        if self.min > self.max:
            raise ValueError(f"`min` ({self.min}) must be <= `max` ({self.max})")
        if self.initial is not None and not self.min <= self.initial <= self.max:
            raise ValueError(
                f"`initial` ({self.initial}) must be within [`min`, `max`] = "
                f"[{self.min}, {self.max}]"
            )
        return self


class PartitionPolicy(SpecModel):
    """State partitions of the stateful stage and when to repartition them."""

    model_config = ConfigDict(json_schema_extra=cel(("self.min <= self.max", "min must be <= max")))

    min: int = Field(default=1, ge=1, le=4096, description="Fewest state partitions (count).")
    max: int = Field(
        default=64,
        ge=1,
        le=4096,
        description="Most state partitions (count). Each partition is one task per batch, so more "
        "than the task slots only adds per-task overhead.",
    )
    repartition: bool = Field(
        default=True,
        description="Allow repartitioning keyed state from the checkpoint (the SEEP move). Without "
        "it a partition-bound stateful stage is reported, never fixed.",
    )
    per_slot: int = Field(
        default=1,
        ge=1,
        le=16,
        description="State partitions per task slot when repartitioning (count). 1 gives one task "
        "per slot per batch; more smooths skew at the price of per-task overhead.",
    )
    repartition_bytes_per_second: float = Field(
        default=8.0e6,
        gt=0,
        le=1e12,
        description="Measured speed of an offline state repartition (bytes/s). Default from "
        "3M keys, 113 MB in 12.9 s on 2 cores (docs/spark-facts.md).",
    )
    restart_seconds: float = Field(
        default=10.0,
        ge=0,
        le=3600,
        description="Fixed cost of stopping at a batch boundary and resuming the query (s): "
        "session restart ~6 s plus the first batch (docs/spark-facts.md).",
    )
    max_downtime_seconds: float = Field(
        default=120.0,
        gt=0,
        le=86400,
        description="Never start a repartition whose estimated downtime exceeds this (s).",
    )

    @model_validator(mode="after")
    def _bounds(self) -> PartitionPolicy:
        if self.min > self.max:
            raise ValueError(f"`min` ({self.min}) must be <= `max` ({self.max})")
        return self


class UtilizationBand(SpecModel):
    """Target busy fraction of the task slots, with a band inside which the engine holds."""

    model_config = ConfigDict(
        json_schema_extra=cel(
            ("self.low < self.target && self.target < self.high", "low < target < high must hold")
        )
    )

    target: float = Field(
        default=0.7,
        gt=0,
        lt=1,
        description="Utilization to size for (fraction of slot time busy). 0.7 leaves 30% headroom "
        "for bursts, the Flink autoscaler's default.",
    )
    low: float = Field(
        default=0.4,
        gt=0,
        lt=1,
        description="Below this the job is over-provisioned and may scale in (fraction).",
    )
    high: float = Field(
        default=0.9,
        gt=0,
        lt=1,
        description="Above this the job is under-provisioned and scales out (fraction). 0.9 is "
        "Spark's DStream scale-up ratio.",
    )

    @model_validator(mode="after")
    def _order(self) -> UtilizationBand:
        if not self.low < self.target < self.high:
            raise ValueError(
                f"`low` ({self.low}) < `target` ({self.target}) < `high` ({self.high}) must hold"
            )
        return self


class LagPolicy(SpecModel):
    """The latency promise, and how fast a backlog must be drained."""

    slo_seconds: float = Field(
        default=30.0,
        gt=0,
        le=86400,
        description="The lag SLO (s): the age of the oldest unprocessed record must stay below it.",
    )
    catch_up_seconds: float = Field(
        default=60.0,
        gt=0,
        le=86400,
        description="Drain a backlog within this time (s). The required rate adds "
        "backlog / catch_up_seconds to the arrival rate.",
    )
    backlog_tolerance_seconds: float = Field(
        default=5.0,
        ge=0,
        le=3600,
        description="A backlog younger than this (s) is normal micro-batch queueing, not catch-up.",
    )


EVALUATION_INTERVAL_FLOOR_SECONDS = 1.0
"""The shortest evaluation interval: each evaluation of a job reads its metrics and writes its
status, so a policy at 1e-9 s made every job that references it a hot loop against the API
server (and ``simulate`` at 5e-324 s never ended). No Spark trigger is shorter than ~1 s that
an evaluation could follow (tests/unit/contracts/test_strict_models.py)."""


class TimingPolicy(SpecModel):
    """When the engine looks, how much it trusts, and how long it waits between actions."""

    model_config = ConfigDict(
        json_schema_extra=cel(
            (
                "self.staleAfterSeconds >= self.evaluationIntervalSeconds",
                "staleAfterSeconds must be >= evaluationIntervalSeconds",
            )
        )
    )

    evaluation_interval_seconds: float = Field(
        default=10.0, ge=EVALUATION_INTERVAL_FLOOR_SECONDS, le=3600,
        description="Evaluate every this many seconds (s); at least 1 s (every evaluation "
        "writes the job's status to the API server).",
    )
    window_seconds: float = Field(
        default=30.0,
        gt=0,
        le=3600,
        description="Metrics window the snapshot aggregates (s); long enough to hold a few "
        "batches.",
    )
    stale_after_seconds: float = Field(
        default=45.0,
        gt=0,
        le=86400,
        description="Metrics older than this (s) are stale: the engine holds and says so. "
        "The age of a batch in flight does not count: a long batch commits nothing meanwhile.",
    )
    min_batches: int = Field(
        default=1,
        ge=1,
        le=1000,
        description="Fewest completed batches in the window before sizing on it (count). One is "
        "enough by default: while a backlog drains, a single batch may fill the whole window, "
        "and its busy time measures the true rate as well as many small ones.",
    )
    cooldown_seconds: float = Field(
        default=30.0,
        ge=0,
        le=86400,
        description="After an action, hold this long (s) so its effect shows in the metrics. "
        "Executors register 5–12 s after a request (docs/spark-facts.md).",
    )
    scale_down_stabilization_seconds: float = Field(
        default=120.0,
        ge=0,
        le=86400,
        description="Scale in only to the highest recommendation seen over this window (s), so a "
        "dip does not undo capacity a burst will need again (HPA uses 300 s).",
    )
    executor_startup_seconds: float = Field(
        default=12.0,
        ge=0,
        le=3600,
        description="Request to first task on a new executor (s), measured 8–12 s; used to size "
        "the backlog a scale-out must also absorb.",
    )

    @model_validator(mode="after")
    def _window(self) -> TimingPolicy:
        if self.stale_after_seconds < self.evaluation_interval_seconds:
            raise ValueError(
                f"`staleAfterSeconds` ({self.stale_after_seconds}) must be >= "
                f"`evaluationIntervalSeconds` ({self.evaluation_interval_seconds})"
            )
        return self


class SafetyPolicy(SpecModel):
    """Guards against actions that do not help."""

    ineffective_scale_up_ratio: float = Field(
        default=0.3,
        ge=0,
        le=1,
        description="A scale-out that delivered less than this fraction of its expected gain in "
        "processing rate is ineffective; the same move is then blocked (fraction).",
    )
    blocked_action_seconds: float = Field(
        default=600.0,
        ge=0,
        le=86400,
        description="How long an ineffective move stays blocked (s) (Dhalion's blacklist).",
    )
    max_scale_up_factor: float = Field(
        default=4.0,
        ge=1,
        le=100,
        description="Grow executors by at most this factor in one action (ratio), unless the "
        "overload is evident: arrival measured, processed below it with a backlog, and busy "
        "past utilization.high; then one action goes to the size needed.",
    )


class DiagnosisPolicy(SpecModel):
    """Thresholds that name a bottleneck's kind."""

    skew_ratio: float = Field(
        default=3.0,
        gt=1,
        le=1000,
        description="Longest task / median task above this means skew (ratio): more slots will "
        "not shorten the longest task.",
    )
    memory_pressure_ratio: float = Field(
        default=0.9,
        gt=0,
        le=1,
        description="Executor memory in use / available above this is memory pressure (fraction).",
    )
    overhead_share: float = Field(
        default=0.5,
        gt=0,
        lt=1,
        description="Fixed per-batch driver time / trigger interval above this means the driver "
        "overhead dominates: suggest a longer trigger instead of executors (fraction).",
    )
    no_progress_seconds: float = Field(
        default=60.0,
        gt=0,
        le=86400,
        description="No committed batch for this long (s) while data waits, not explained by a "
        "batch in flight, means the job failed (a long batch in flight is under-provisioning).",
    )


class ScalingPolicySpec(SpecModel):
    """Everything the decision engine needs to know about what the user wants."""

    model_config = ConfigDict(
        json_schema_extra=cel(
            (
                "!has(self.timing) || self.timing.scaleDownStabilizationSeconds == 0.0 || "
                "self.timing.cooldownSeconds < self.timing.scaleDownStabilizationSeconds",
                "timing.cooldownSeconds must be < timing.scaleDownStabilizationSeconds",
            )
        )
    )

    mode: Literal["enforce", "recommend"] = Field(
        default="enforce",
        description="enforce: act. recommend: decide and report (logs, Events, status) but never "
        "act — how a new policy earns trust.",
    )
    executors: ExecutorBounds = Field(default_factory=ExecutorBounds)
    partitions: PartitionPolicy = Field(default_factory=PartitionPolicy)
    utilization: UtilizationBand = Field(default_factory=UtilizationBand)
    lag: LagPolicy = Field(default_factory=LagPolicy)
    timing: TimingPolicy = Field(default_factory=TimingPolicy)
    safety: SafetyPolicy = Field(default_factory=SafetyPolicy)
    diagnosis: DiagnosisPolicy = Field(default_factory=DiagnosisPolicy)

    @model_validator(mode="after")
    def _cross(self) -> ScalingPolicySpec:
        if self.timing.cooldown_seconds >= self.timing.scale_down_stabilization_seconds > 0:
            raise ValueError(
                f"`timing.cooldownSeconds` ({self.timing.cooldown_seconds}) must be < "
                f"`timing.scaleDownStabilizationSeconds` "
                f"({self.timing.scale_down_stabilization_seconds})"
            )
        return self


class ScalingPolicy(SpecModel):
    """A ``ScalingPolicy`` manifest (apiVersion ``stream-autoscaler.io/v1alpha1``)."""

    api_version: Literal["stream-autoscaler.io/v1alpha1"] = Field(
        default="stream-autoscaler.io/v1alpha1", alias="apiVersion", description="API version."
    )
    kind: Literal["ScalingPolicy"] = Field(default="ScalingPolicy", description="ScalingPolicy.")
    metadata: ObjectMeta
    spec: ScalingPolicySpec = Field(default_factory=ScalingPolicySpec)
