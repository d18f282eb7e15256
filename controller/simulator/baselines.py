"""The autoscalers we compare against, each with its published defaults.

Each baseline is a pure rule (a function of what it observes and its own remembered state,
unit-tested on hand-computed cases) wrapped in a small class the loop ticks. Every baseline reads
the same :class:`MetricsSnapshot` the engine reads, over its own window. They scale the executor
count in place; only ``flink`` restarts the job to change parallelism, and it alone changes the
state partitions (Flink redistributes key groups on rescale; :mod:`controller.simulator.flink`).
The loop's side of the interface is :mod:`controller.simulator.autoscaler`. Sources in
docs/simulator.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from contracts.policy import ScalingPolicySpec
from controller.simulator.autoscaler import (
    Autoscaler,
    Command,
    Current,
    Observation,
    clamp,
    round_half_up,
)
from controller.simulator.flink import (
    FLINK_BACKLOG_LAG_THRESHOLD,
    FLINK_SCALE_DOWN_INTERVAL,
    FLINK_STABILIZATION_INTERVAL,
    DelayedScaleDown,
    Flink,
    FlinkVertex,
    flink_apply_scale_down_interval,
    flink_processing_backlog,
    flink_scale,
    flink_target_capacity,
    flink_time_scale,
    flink_vertex_parallelism,
)
from controller.simulator.model import JobModel

__all__ = [
    "BASELINES",
    "Autoscaler",
    "Command",
    "Current",
    "DStream",
    "DelayedScaleDown",
    "Flink",
    "FlinkVertex",
    "Hpa",
    "Observation",
    "Static",
    "clamp",
    "dstream_processing_seconds",
    "dstream_target",
    "executors_for",
    "flink_apply_scale_down_interval",
    "flink_processing_backlog",
    "flink_scale",
    "flink_target_capacity",
    "flink_time_scale",
    "flink_vertex_parallelism",
    "hpa_rate_limit",
    "hpa_recommend",
    "hpa_stabilize",
    "initial_executors",
    "make_baseline",
    "round_half_up",
]


# --- static --------------------------------------------------------------------------------


@dataclass
class Static:
    """Fixed executors, never changed."""

    name: str = "static"
    interval: float = math.inf
    window: float = 30.0
    auto_recover: bool = True

    def tick(self, obs: Observation, now: float, cur: Current) -> Command | None:
        return None


# --- Kubernetes HPA ------------------------------------------------------------------------


def hpa_recommend(busy_cores: float, ready: int, current: int, target: float, tol: float) -> int:
    """HPA's replica calculator on CPU utilization.

    ``usageRatio = utilization / target``; within ``1 ± tol`` keep ``current``; otherwise
    ``ceil(usageRatio * ready)``, which equals ``ceil(busy_cores / target)`` (starting pods count as
    0% busy when scaling up, so they do not change the answer).
    """
    if ready <= 0:
        return current
    ratio = busy_cores / ready / target
    if abs(ratio - 1.0) <= tol:
        return current
    return math.ceil(busy_cores / target - 1e-9)


def hpa_stabilize(
    rec: int, current: int, window_recs: list[int], up_recs: list[int] | None = None
) -> int:
    """HPA behaviour: scale-down to the max recommendation in the stabilization window, scale-up
    to the min in the scale-up window (0 s by default: just ``rec``)."""
    down = max([*window_recs, rec])
    up = min([*(up_recs or []), rec])
    if current < up:
        return up
    if current > down:
        return down
    return current


def hpa_rate_limit(desired: int, current: int) -> int:
    """Default HPA scale-up policies: at most +100% or +4 pods per period, whichever is more."""
    return min(desired, max(2 * current, current + 4))


@dataclass
class Hpa:
    """Kubernetes HPA on CPU: target 70% (a common setting; HPA has no default target), 10%
    tolerance, 300 s scale-down stabilization, 15 s sync period."""

    min_executors: int
    max_executors: int
    target: float = 0.7
    tolerance: float = 0.1
    stabilization: float = 300.0
    name: str = "hpa"
    interval: float = 15.0
    window: float = 15.0
    auto_recover: bool = True
    recs: list[tuple[float, int]] = field(default_factory=list)

    def tick(self, obs: Observation, now: float, cur: Current) -> Command | None:
        snap = obs.snapshot
        busy = obs.cpu_seconds
        if busy is None or not snap.executors or snap.window_seconds is None:
            return None  # missing metrics: HPA skips the pod, never reads it as zero
        # CPU utilization is usage over the pod's request (all its cores): work in executors
        used = busy / snap.window_seconds / (snap.cores_per_executor or 1)
        rec = hpa_recommend(used, snap.executors, cur.executors, self.target, self.tolerance)
        rec = clamp(rec, *self._bounds())
        self.recs = [(t, r) for t, r in self.recs if t > now - self.stabilization]
        desired = hpa_stabilize(rec, cur.executors, [r for _, r in self.recs])
        self.recs.append((now, rec))
        desired = clamp(hpa_rate_limit(desired, cur.executors), *self._bounds())
        if desired == cur.executors:
            return None
        return Command("scale", desired, reason=f"cpu {used / snap.executors:.2f} vs {self.target}")

    def _bounds(self) -> tuple[int, int]:
        return self.min_executors, self.max_executors


# --- Spark DStream dynamic allocation ------------------------------------------------------


def dstream_processing_seconds(batch_seconds: float, overhead_seconds: float | None) -> float:
    """What Spark's listener reports as a batch's ``processingDelay``.

    ``BatchInfo.processingDelay = processingEndTime - processingStartTime``; ``JobScheduler``
    sets ``processingStartTime`` when the batch's first job starts and ``processingEndTime`` when
    its last job ends. The model's per-batch driver overhead (planning, offsets, WAL, commits)
    runs before the first job, so it is not processing time: batch wall time minus overhead.
    """
    return max(0.0, batch_seconds - (overhead_seconds or 0.0))


def dstream_target(
    avg_processing_seconds: float,
    interval: float,
    live: int,
    requested: int,
    lo: int,
    hi: int,
    up: float = 0.9,
    down: float = 0.3,
) -> int:
    """The executor total after Spark's ``streaming.scheduler.ExecutorAllocationManager
    .manageAllocation``.

    ``ratio = averageBatchProcTime / batchDurationMs``, the average in whole milliseconds (Long
    division). ``ratio >= up``: ``requestExecutors(max(round(ratio), 1))`` asks for a total of
    ``max(min(max, registered + n), min)`` (Scala ``math.round``: half up). ``ratio <= down``:
    ``killExecutor`` kills one registered executor if more than min are registered, and
    ``killExecutor`` lowers the requested total by one (``adjustTargetNumExecutors = true``).
    Otherwise the total stays ``requested``.
    """
    avg_ms = math.floor(avg_processing_seconds * 1000 + 1e-6)
    ratio = avg_ms / (interval * 1000)
    if ratio >= up:
        return max(min(hi, live + max(round_half_up(ratio), 1)), lo)
    if ratio <= down and live > 0 and live > lo:
        return requested - 1
    return requested


@dataclass
class DStream:
    """``spark.streaming.dynamicAllocation.*``: scalingUpRatio 0.9, scalingDownRatio 0.3,
    scalingInterval 60 s; ratio of the average batch processing time (``processingDelay``: first
    job start to last job end, no driver overhead) to the batch interval."""

    min_executors: int
    max_executors: int
    up: float = 0.9
    down: float = 0.3
    name: str = "dstream"
    interval: float = 60.0
    window: float = 60.0
    auto_recover: bool = True

    def tick(self, obs: Observation, now: float, cur: Current) -> Command | None:
        snap = obs.snapshot
        if not snap.batches or snap.batch_duration_seconds is None:
            return None  # no completed batch since the last tick: Spark does nothing
        trig = snap.trigger_interval_seconds or 1.0
        live = snap.executors or 0
        proc = dstream_processing_seconds(snap.batch_duration_seconds, snap.overhead_seconds)
        n = dstream_target(
            proc,
            trig,
            live,
            cur.executors,
            self.min_executors,
            self.max_executors,
            self.up,
            self.down,
        )
        if n == cur.executors:
            return None
        return Command("scale", n, reason=f"processing/interval {proc / trig:.2f}")


# --- construction --------------------------------------------------------------------------

BASELINES = ("static", "static-mean", "static-peak", "hpa", "dstream", "flink")


def initial_executors(model: JobModel, policy: ScalingPolicySpec) -> int:
    """What every autoscaler starts with: the policy's initial count, else the job's own
    within the policy bounds."""
    if policy.executors.initial is not None:
        return policy.executors.initial
    return clamp(model.initial_executors, policy.executors.min, policy.executors.max)


def executors_for(rate: float, model: JobModel, policy: ScalingPolicySpec) -> int:
    """Fewest executors that sustain ``rate`` at the trigger with state spread over them."""
    for n in range(max(policy.executors.min, 1), policy.executors.max + 1):
        parts = clamp(n * model.cores_per_executor, policy.partitions.min, policy.partitions.max)
        if model.sustainable_rate(n, parts) >= rate:
            return n
    return policy.executors.max


def make_baseline(
    name: str, model: JobModel, policy: ScalingPolicySpec, mean_rate: float, peak_rate: float
) -> tuple[Autoscaler, int, int]:
    """(autoscaler, initial executors, initial state partitions) for a baseline name."""
    lo, hi = policy.executors.min, policy.executors.max
    n0, p0 = initial_executors(model, policy), model.state_partitions
    if name in ("static-mean", "static-peak"):
        n = executors_for(mean_rate if name == "static-mean" else peak_rate, model, policy)
        parts = clamp(n * model.cores_per_executor, policy.partitions.min, policy.partitions.max)
        return Static(name=name), n, parts
    if name == "static":
        return Static(), n0, p0
    if name == "hpa":
        return Hpa(lo, hi), n0, p0
    if name == "dstream":
        return DStream(lo, hi), n0, p0
    if name == "flink":
        t = policy.timing
        restart = model.repartition_seconds(0.0, True)
        k = flink_time_scale(t.window_seconds)  # Flink's 15 min metrics window -> ours
        flink = Flink(
            lo,
            hi,
            policy.partitions.max,
            catch_up=policy.lag.catch_up_seconds,
            restart_time=restart,
            stabilization=FLINK_STABILIZATION_INTERVAL * k,
            scale_down_interval=FLINK_SCALE_DOWN_INTERVAL * k,
            backlog_lag_threshold=FLINK_BACKLOG_LAG_THRESHOLD * k,
            interval=t.evaluation_interval_seconds,
            window=t.window_seconds,
        )
        return flink, n0, p0
    raise ValueError(f"unknown baseline {name!r}; choose from {', '.join(BASELINES)}")
