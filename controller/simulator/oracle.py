"""The clairvoyant oracle: the fewest executor-seconds that never violate the lag SLO.

A lower bound, not an achievable schedule. It knows the whole trace and assumes:

- instant scaling (no executor start delay) and free repartitioning (no downtime), so the state
  partitions always match the executors (up to the policy's partitions.max);
- fluid processing at the model's full rate (:meth:`JobModel.fluid_rate`): no per-batch overhead,
  no batch discretization, no task waves — every executor 100% busy on useful work;
- integer executors within the policy's ``[executors.min, executors.max]``, held for 1 s steps;
- the SLO is met when, at the end of every step, the backlog holds only records younger than the
  SLO (FIFO): ``backlog(t) <= arrived(t) - arrived(t - slo)``; at the end of the run the backlog
  is at most one trigger interval's arrivals (where a real job stands just after a commit).

It is a dynamic programme over (step, backlog) with the backlog on a grid of ``grid_records``
records, rounded down after each step (so rounding only ever helps the oracle: the result stays a
lower bound). Minimises SLO-violation steps first (penalty), then executor-seconds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from contracts.policy import ScalingPolicySpec
from contracts.trace import Trace
from controller.simulator.model import JobModel

PENALTY = 1e6
"""Cost of one step in violation, in executor-seconds: feasibility first."""
MAX_GRID_CELLS = 20_000_000
"""Steps x backlog-grid cells of the programme (6 bytes each: ~120 MB). A trace whose backlog
grid would be larger (rates near the trace limit, a week of steps) gets a coarser grid instead
of a petabyte allocation; the bundled traces stay far below it (~10^5 cells)."""


@dataclass(frozen=True)
class OracleResult:
    """The oracle's schedule and what it costs."""

    executors: tuple[int, ...]
    """Executors per step (count), step ``i`` covering ``[i*dt, (i+1)*dt)``."""
    backlog: tuple[float, ...]
    """Backlog at the end of each step (records)."""
    dt: float
    executor_seconds: float
    slo_violation_seconds: float


def solve(
    trace: Trace,
    model: JobModel,
    policy: ScalingPolicySpec,
    duration: float | None = None,
    dt: float = 1.0,
    grid_records: float | None = None,
) -> OracleResult:
    """The oracle schedule for ``trace`` (records/s or load) on ``model`` under ``policy``.

    For a schedule that pays the overhead, the task waves and the start delay, see
    :mod:`controller.simulator.oracle_plus`.
    """
    if trace.unit != "input_rate":
        trace = trace.scaled(model.load_unit_rate)
    horizon = duration or trace.duration
    steps = max(1, math.ceil(horizon / dt - 1e-9))
    slo = policy.lag.slo_seconds
    trig = model.trigger_seconds
    q = grid_records or model.load_unit_rate * dt / 100.0
    choices = list(range(policy.executors.min, policy.executors.max + 1))
    rates = [model.fluid_rate(e, policy.partitions.max) * dt for e in choices]
    ends = [min((i + 1) * dt, horizon) for i in range(steps)]
    arrivals = [trace.arrived(ends[i]) - trace.arrived(i * dt) for i in range(steps)]
    allowed = [trace.arrived(t) - trace.arrived(t - slo) for t in ends]
    # at the end, no more backlog than one trigger's arrivals (as a job that just committed):
    # otherwise the oracle would save by leaving the last SLO's worth of records unprocessed
    allowed[-1] = min(allowed[-1], trace.arrived(horizon) - trace.arrived(horizon - trig))
    if max(allowed) / q + 3 > MAX_GRID_CELLS / steps:  # coarser records grid, bounded memory
        q = max(allowed) / max(1.0, MAX_GRID_CELLS / steps - 3)
    size = int(max(allowed) / q) + 3
    idx = np.arange(size)
    cost = np.full(size, np.inf)
    cost[0] = 0.0
    pick = np.zeros((steps, size), dtype=np.int16)
    pred = np.zeros((steps, size), dtype=np.int32)
    for i in range(steps):
        over = idx * q > allowed[i] + 1e-6
        best = np.full(size, np.inf)
        for k, (e, mu) in enumerate(zip(choices, rates, strict=True)):
            cand, src = _shift(cost, math.floor((arrivals[i] - mu) / q))
            cand = cand + e * (ends[i] - i * dt) + over * PENALTY * dt
            better = cand < best
            best = np.where(better, cand, best)
            pick[i] = np.where(better, k, pick[i])
            pred[i] = np.where(better, src, pred[i])
        cost = best
    state = int(np.argmin(cost))
    execs, backlog = [0] * steps, [0.0] * steps
    violation = 0.0
    for i in range(steps - 1, -1, -1):
        execs[i] = choices[int(pick[i, state])]
        backlog[i] = state * q
        if state * q > allowed[i] + 1e-6:
            violation += ends[i] - i * dt
        state = int(pred[i, state])
    spent = sum(e * (ends[i] - i * dt) for i, e in enumerate(execs))
    return OracleResult(tuple(execs), tuple(backlog), dt, spent, violation)


def _shift(cost: np.ndarray, delta: int) -> tuple[np.ndarray, np.ndarray]:
    """Costs after the backlog moves by ``delta`` grid cells, clipped at 0 and at the top
    (merged cells keep the cheaper source), and the source cell of each."""
    size = cost.size
    out = np.full(size, np.inf)
    src = np.zeros(size, dtype=np.int32)
    if delta >= 0:
        d = min(delta, size - 1)
        out[d:] = cost[: size - d]
        src[d:] = np.arange(size - d)
        if d > 0:  # everything that would overflow lands in the top cell (optimistic)
            tail = cost[size - d - 1 :]
            j = int(np.argmin(tail))
            out[-1], src[-1] = tail[j], size - d - 1 + j
    else:
        d = min(-delta, size - 1)
        head = cost[: d + 1]
        j = int(np.argmin(head))
        out[0], src[0] = head[j], j
        out[1 : size - d] = cost[d + 1 :]
        src[1 : size - d] = np.arange(d + 1, size)
    return out, src
