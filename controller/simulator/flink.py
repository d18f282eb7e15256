"""The Flink Kubernetes Operator autoscaler as a baseline, with its published defaults.

Follows ``flink-autoscaler`` of the operator's release 1.15.0 step by step (docs/simulator.md,
"Baselines", lists each step against its source): per vertex (``JobVertexScaler``) the true
processing rate from busy time, a target capacity with catch-up and restart terms, the max
scale-down factor, the parallelism aligned to the key groups / source partitions
(``EVENLY_SPREAD``), and scale-downs delayed over ``scale-down.interval`` per vertex
(``DelayedScaleDown``); the job is rescaled only when a changed vertex is outside its utilization
band (``ScalingExecutor``). Every rescale restarts the job and redistributes its state (key
groups), so it alone of the baselines changes the state partitions.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

from controller.core.snapshot import StageMetrics
from controller.simulator.autoscaler import Command, Current, Observation, clamp, round_half_up

FLINK_METRICS_WINDOW = 900.0
"""``job.autoscaler.metrics.window`` default (15 min): the reference for the time scale."""
FLINK_STABILIZATION_INTERVAL = 300.0
"""``job.autoscaler.stabilization.interval`` default (5 min)."""
FLINK_SCALE_DOWN_INTERVAL = 3600.0
"""``job.autoscaler.scale-down.interval`` default (1 h)."""
FLINK_BACKLOG_LAG_THRESHOLD = 300.0
"""``job.autoscaler.backlog-processing.lag-threshold`` default (5 min)."""
FLINK_KEY_GROUPS = 128
"""Flink's default max parallelism (key groups) for a job of parallelism <= 85."""
FLINK_VERTEX_MAX_PARALLELISM = 200
"""``job.autoscaler.vertex.max-parallelism`` default."""


def flink_time_scale(window_seconds: float) -> float:
    """The factor applied to every Flink control-loop duration: our metrics window over Flink's
    (``job.autoscaler.metrics.window``, 15 min), e.g. 30 s / 15 min = 1/30."""
    return window_seconds / FLINK_METRICS_WINDOW


def flink_target_capacity(
    input_rate: float,
    lag_records: float,
    util: float,
    catch_up: float,
    restart: float,
    with_restart: bool,
) -> float:
    """``AutoScalerUtils.getTargetProcessingCapacity``: lag / catch-up + input x restart /
    catch-up (when ``with_restart``) + input / utilization, utilization clamped to [0, 1] (0 gives
    infinity), rounded half up (``Math.round``)."""
    util = min(1.0, max(0.0, util))
    if util == 0:
        return math.inf
    lag_rate = lag_records / catch_up if catch_up > 0 else 0.0
    restart_rate = input_rate * restart / catch_up if with_restart and catch_up > 0 else 0.0
    return round_half_up(lag_rate + restart_rate + input_rate / util)


def flink_processing_backlog(
    lag_records: float, input_rate: float | None, threshold: float
) -> bool:
    """``ScalingMetricEvaluator.isProcessingBacklog``: the source's lag in seconds of its input
    rate (records read per second) is above ``backlog-processing.lag-threshold``. No input rate:
    not known, False; a zero rate with a lag counts as backlog (Java's x / 0 = infinity)."""
    if input_rate is None or math.isnan(input_rate):
        return False
    if input_rate <= 0:
        return lag_records > 0
    return lag_records / input_rate > threshold


@dataclass(frozen=True)
class FlinkVertex:
    """One vertex as Flink sees it: its rows and busy time over the window, its parallelism, and
    the bounds ``JobVertexScaler.scale`` applies.

    ``max_parallelism`` is the vertex's ``MAX_PARALLELISM`` (its key groups); ``source_partitions``
    is ``NUM_SOURCE_PARTITIONS`` (0: not a source); ``keyed``: it has a HASH input. Only sources
    and keyed vertices are aligned. ``upper_limit`` is ``vertex.max-parallelism``.
    """

    rows: float
    busy_seconds: float
    parallelism: int
    max_parallelism: int = FLINK_KEY_GROUPS
    source_partitions: int = 0
    keyed: bool = False
    upper_limit: int = FLINK_VERTEX_MAX_PARALLELISM
    lower_limit: int = 1


def flink_scale(v: FlinkVertex, scale_factor: float) -> int:
    """``JobVertexScaler.scale`` with the default ``EVENLY_SPREAD`` alignment.

    ``ceil(scale_factor x current)`` clamped to ``[min(current, lower_limit),
    min(max_parallelism, max(current, upper_limit))]``. Sources and keyed vertices are then aligned
    to ``N`` = their source partitions, else their key groups: the first divisor of ``N`` upwards
    (up to ``min(N, upper bound)``, and for a scale-down no higher than the current parallelism);
    failing that, downwards to where the per-subtask share ``N // p`` grows, snapped up to a
    divisor; a result that would reverse the direction keeps the current parallelism.
    """
    cur = v.parallelism
    lower = min(cur, v.lower_limit)
    upper = min(v.max_parallelism, max(cur, v.upper_limit))
    new = min(max(lower, math.ceil(scale_factor * cur)), upper)
    if not (v.source_partitions > 0 or v.keyed) or new == cur:
        return new
    n = v.source_partitions if v.source_partitions > 0 else v.max_parallelism
    up = new > cur
    search_to = min(n, upper) if up else min(cur, n, upper)
    for p in range(new, search_to + 1):
        if n % p == 0:
            return p
    p = new
    while p > 0:
        if n // p > n // new:
            if n % p != 0:
                p += 1
            break
        p -= 1
    p = max(p, lower)
    if (up and p <= cur) or (not up and p >= cur):
        return cur  # alignment would reverse the direction: blocked (ScalingLimited event)
    return p


def flink_vertex_parallelism(
    v: FlinkVertex,
    input_rate: float,
    lag: float,
    *,
    target: float,
    boundary: float,
    catch_up: float,
    restart: float,
    max_down_factor: float,
    max_up_factor: float = 100000.0,
    backlog: bool = False,
) -> tuple[int, bool]:
    """(recommended parallelism, outside the utilization band) for one vertex:
    ``JobVertexScaler.computeScaleTargetParallelism`` before the delayed scale-down.

    True processing rate = rows x parallelism / busy time (input rate over the busy fraction of a
    subtask). Band (``computeProcessingRateThresholds``): outside when the true rate is below the
    capacity needed at ``target + boundary`` (no restart term) or above the capacity needed at
    ``target - boundary`` (with the restart term); while processing a backlog the band is
    utilization 1.0 .. 0 (no scale-down trigger). Scale factor = target capacity / true rate,
    clamped to ``[1 - max_down_factor, 1 + max_up_factor]``; then :func:`flink_scale`.
    """
    true_rate = v.rows * v.parallelism / v.busy_seconds if v.busy_seconds > 0 else math.inf
    hi_util, lo_util = (1.0, 0.0) if backlog else (target + boundary, target - boundary)
    up_thr = flink_target_capacity(input_rate, lag, hi_util, catch_up, restart, False)
    down_thr = flink_target_capacity(input_rate, lag, lo_util, catch_up, restart, True)
    outside = true_rate < up_thr or true_rate > down_thr
    cap = flink_target_capacity(input_rate, lag, target, catch_up, restart, True)
    factor = cap / true_rate if math.isfinite(true_rate) else 0.0
    factor = min(max(factor, 1.0 - max_down_factor), 1.0 + max_up_factor)
    return flink_scale(v, factor), outside


@dataclass
class DelayedScaleDown:
    """``DelayedScaleDown``: per vertex, the first time a scale-down was recommended and the
    recommendations since, kept as a list of decreasing parallelism (a sliding-window max)."""

    first: dict[str, float] = field(default_factory=dict)
    recs: dict[str, deque[tuple[float, int, bool]]] = field(default_factory=dict)

    def clear_vertex(self, vertex: str) -> None:
        self.first.pop(vertex, None)
        self.recs.pop(vertex, None)

    def clear_all(self) -> None:
        self.first.clear()
        self.recs.clear()

    def trigger(self, vertex: str, now: float, p: int, outside: bool) -> float:
        """``triggerScaleDown`` + ``recordRecommendedParallelism``: drop the recorded
        recommendations not above ``p`` and append it; returns the first trigger time."""
        first = self.first.setdefault(vertex, now)
        q = self.recs.setdefault(vertex, deque())
        while q and q[-1][1] <= p:
            q.pop()
        q.append((now, p, outside))
        return first

    def max_recommended(self, vertex: str, window_start: float) -> tuple[int, bool]:
        """``getMaxRecommendedParallelism``: the highest recommendation at or after
        ``window_start`` (older ones are dropped), with its out-of-band flag."""
        q = self.recs[vertex]
        while q and q[0][0] < window_start:
            q.popleft()
        _, p, outside = q[0]
        return p, outside


def flink_apply_scale_down_interval(
    delayed: DelayedScaleDown,
    vertex: str,
    now: float,
    current: int,
    recommended: int,
    outside: bool,
    interval: float,
) -> tuple[int, bool] | None:
    """The vertex's parallelism change after ``JobVertexScaler.detectBlockScaling`` /
    ``applyScaleDownInterval``, or None for no change.

    The recommendation equals the current parallelism or is above it: the vertex's delayed
    scale-down is cleared (a scale-up is returned as is). Below it: recorded; no change until
    ``interval`` has passed since the first scale-down trigger, then the highest recommendation
    of the last ``interval`` with its own out-of-band flag. A vertex back inside its band keeps
    its pending scale-down (only a recommendation >= current, or a rescale, clears it).
    """
    if recommended >= current:
        delayed.clear_vertex(vertex)
        return None if recommended == current else (recommended, outside)
    if interval <= 0:
        return recommended, outside
    first = delayed.trigger(vertex, now, recommended, outside)
    window_start = now - interval
    if window_start < first:
        return None
    return delayed.max_recommended(vertex, window_start)


@dataclass
class Flink:
    """Flink Kubernetes Operator autoscaler rule (release 1.15.0 defaults): target utilization
    0.7, boundary 0.3, catch-up and restart terms, max scale-down factor 0.6, EVENLY_SPREAD
    alignment to 128 key groups / the source partitions, scale-downs delayed per vertex over
    ``scale-down.interval`` to the max recommendation of the last interval, backlog-processing
    band; every rescale restarts the job and redistributes its state. ``make_baseline`` scales
    the durations (``flink_time_scale``)."""

    min_executors: int
    max_executors: int
    max_partitions: int
    catch_up: float
    restart_time: float
    stabilization: float = FLINK_STABILIZATION_INTERVAL
    target: float = 0.7
    boundary: float = 0.3
    scale_down_interval: float = FLINK_SCALE_DOWN_INTERVAL
    backlog_lag_threshold: float = FLINK_BACKLOG_LAG_THRESHOLD
    max_down_factor: float = 0.6
    max_up_factor: float = 100000.0
    key_groups: int = FLINK_KEY_GROUPS
    name: str = "flink"
    interval: float = 10.0
    window: float = 30.0
    auto_recover: bool = True
    blocked_until: float = 0.0
    delayed: DelayedScaleDown = field(default_factory=DelayedScaleDown)

    def vertex(self, s: StageMetrics, slots: int, cores: int) -> FlinkVertex:
        """Our stage as a Flink vertex. Its parallelism: the state partitions for the stateful
        stage (one subtask per key-group range), else the slots it can use. Flink cannot run a
        vertex wider than the slots the policy allows, so ``vertex.max-parallelism`` is
        ``executors.max`` x cores (and ``partitions.max`` for the stateful stage, the stage's
        partitions for a stateless one)."""
        slot_cap = self.max_executors * cores
        partitions = s.partitions or 1
        if s.kind == "stateful":
            return FlinkVertex(
                s.rows or 0.0,
                s.busy_seconds or 0.0,
                max(partitions, 1),
                max_parallelism=self.key_groups,
                keyed=True,
                upper_limit=min(slot_cap, self.max_partitions),
            )
        par = max(min(slots, partitions), 1)
        if s.kind == "source":
            return FlinkVertex(
                s.rows or 0.0,
                s.busy_seconds or 0.0,
                par,
                max_parallelism=self.key_groups,
                source_partitions=partitions,
                upper_limit=slot_cap,
            )
        return FlinkVertex(
            s.rows or 0.0,
            s.busy_seconds or 0.0,
            par,
            max_parallelism=self.key_groups,
            upper_limit=min(slot_cap, partitions),
        )

    def tick(self, obs: Observation, now: float, cur: Current) -> Command | None:
        snap = obs.snapshot
        if now < self.blocked_until or not snap.driver_up or not snap.batches:
            return None
        if snap.window_seconds is None or snap.arrival_rate is None or not snap.stages:
            return None
        if any(not s.rows or not s.busy_seconds or not s.partitions for s in snap.stages):
            return None  # no true processing rate: Flink leaves the vertex alone
        rate, lag = snap.arrival_rate, snap.backlog_records or 0.0
        cores = snap.cores_per_executor or 1
        slots = (snap.executors or 0) * cores
        backlog = flink_processing_backlog(lag, snap.processed_rate, self.backlog_lag_threshold)
        new: dict[str, int] = {}
        any_outside = False
        stateful: str | None = None
        for s in snap.stages:
            v = self.vertex(s, slots, cores)
            if s.kind == "stateful":
                stateful = s.name
            p, out = flink_vertex_parallelism(
                v,
                rate,
                lag,
                target=self.target,
                boundary=self.boundary,
                catch_up=self.catch_up,
                restart=self.restart_time,
                max_down_factor=self.max_down_factor,
                max_up_factor=self.max_up_factor,
                backlog=backlog,
            )
            change = flink_apply_scale_down_interval(
                self.delayed, s.name, now, v.parallelism, p, out, self.scale_down_interval
            )
            new[s.name] = v.parallelism if change is None else change[0]
            any_outside = any_outside or (change is not None and change[1])
        if not any_outside:
            return None  # ScalingExecutor: every changed vertex is within its band
        executors = clamp(
            math.ceil(max(new.values()) / cores), self.min_executors, self.max_executors
        )
        partitions = new[stateful] if stateful is not None else cur.partitions
        if (executors, partitions) == (cur.executors, cur.partitions):
            return None
        self.delayed.clear_all()
        self.blocked_until = now + self.restart_time + self.stabilization + self.window
        return Command("restart", executors, partitions, reason="flink rescale")
