"""The Flink Kubernetes Operator autoscaler as a baseline, with its published defaults.

Per vertex (``JobVertexScaler``): the true processing rate from busy time, a target capacity with
catch-up and restart terms, a utilization band, aligned parallelism; every rescale restarts the
job and redistributes its state (key groups), so it alone changes the state partitions. Sources
in docs/simulator.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from controller.simulator.autoscaler import Command, Current, Observation, clamp, round_half_up


def align_up(p: int, divisor_of: int, upper: int) -> int:
    """Flink's alignment: the smallest q >= p (up to ``upper``) dividing ``divisor_of``."""
    for q in range(max(p, 1), max(upper, 1) + 1):
        if divisor_of % q == 0:
            return q
    return max(1, min(p, upper))


def flink_target_capacity(
    input_rate: float,
    lag_records: float,
    util: float,
    catch_up: float,
    restart: float,
    with_restart: bool,
) -> float:
    """``AutoScalerUtils.getTargetProcessingCapacity``: lag / catch-up + input x restart /
    catch-up (when ``with_restart``) + input / utilization."""
    lag_rate = lag_records / catch_up if catch_up > 0 else 0.0
    restart_rate = input_rate * restart / catch_up if with_restart and catch_up > 0 else 0.0
    return round_half_up(lag_rate + restart_rate + input_rate / max(util, 1e-9))


@dataclass(frozen=True)
class FlinkVertex:
    """One vertex as Flink sees it: its rows and busy time over the window, its parallelism."""

    rows: float
    busy_seconds: float
    parallelism: int
    max_parallelism: int
    align_to: int


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
) -> tuple[int, bool]:
    """(new parallelism, outside the utilization band) for one vertex (``JobVertexScaler``).

    True processing rate = rows x parallelism / busy time (rows per second of busy time, times
    the subtasks). Scale when it is below the capacity needed at ``target + boundary`` or above
    the capacity needed at ``target - boundary`` (with the restart term). New parallelism =
    ceil(parallelism x target capacity / true rate), no lower than (1 - max_down_factor) x
    parallelism, aligned up to a divisor of the key groups / source partitions.
    """
    true_rate = v.rows * v.parallelism / v.busy_seconds
    up_thr = flink_target_capacity(input_rate, lag, target + boundary, catch_up, restart, False)
    down_thr = flink_target_capacity(input_rate, lag, target - boundary, catch_up, restart, True)
    outside = true_rate < up_thr or true_rate > down_thr
    cap = flink_target_capacity(input_rate, lag, target, catch_up, restart, True)
    p = math.ceil(v.parallelism * cap / true_rate - 1e-9)
    p = max(p, math.ceil(v.parallelism * (1 - max_down_factor)), 1)
    return align_up(min(p, v.max_parallelism), v.align_to, v.max_parallelism), outside


@dataclass
class Flink:
    """Flink Kubernetes Operator autoscaler rule: target utilization 0.7, boundary 0.3, catch-up
    and restart terms, scale-down deferred over job.autoscaler.scale-down.interval (1 h) using the
    max recommendation, max scale-down factor 0.6, parallelism aligned to source partitions /
    key groups (128); every rescale restarts the job and redistributes its state."""

    min_executors: int
    max_executors: int
    max_partitions: int
    catch_up: float
    restart_time: float
    stabilization: float
    target: float = 0.7
    boundary: float = 0.3
    scale_down_interval: float = 3600.0
    max_down_factor: float = 0.6
    key_groups: int = 128
    name: str = "flink"
    interval: float = 10.0
    window: float = 30.0
    auto_recover: bool = True
    blocked_until: float = 0.0
    down_since: float | None = None
    down_max: tuple[int, int] = (0, 0)

    def tick(self, obs: Observation, now: float, cur: Current) -> Command | None:
        snap = obs.snapshot
        if now < self.blocked_until or not snap.driver_up or not snap.batches:
            return None
        if snap.window_seconds is None or snap.arrival_rate is None or not snap.stages:
            return None
        rate, lag = snap.arrival_rate, snap.backlog_records or 0.0
        slots = (snap.executors or 0) * (snap.cores_per_executor or 1)
        wanted, outside = {}, False
        for s in snap.stages:
            if not s.rows or not s.busy_seconds or not s.partitions:
                return None
            stateful = s.kind == "stateful"
            par = s.partitions if stateful else min(slots, s.partitions)
            v = FlinkVertex(
                s.rows,
                s.busy_seconds,
                max(par, 1),
                self.max_partitions if stateful else s.partitions,
                self.key_groups if stateful else s.partitions,
            )
            p, out = flink_vertex_parallelism(
                v,
                rate,
                lag,
                target=self.target,
                boundary=self.boundary,
                catch_up=self.catch_up,
                restart=self.restart_time,
                max_down_factor=self.max_down_factor,
            )
            wanted[s.kind if stateful else s.name] = p
            outside = outside or out
        partitions = wanted.get("stateful", cur.partitions)
        executors = clamp(max(wanted.values()), self.min_executors, self.max_executors)
        if not outside or (executors, partitions) == (cur.executors, cur.partitions):
            self.down_since = None
            return None
        if executors < cur.executors or partitions < cur.partitions:
            if self.down_since is None:
                self.down_since, self.down_max = now, (executors, partitions)
            self.down_max = (max(self.down_max[0], executors), max(self.down_max[1], partitions))
            if now < self.down_since + self.scale_down_interval:
                return None
            executors, partitions = self.down_max
            self.down_since = None
        self.blocked_until = now + self.restart_time + self.stabilization + self.window
        return Command("restart", executors, partitions, reason="flink rescale")
