"""What the closed loop and an autoscaler say to each other, and the rounding they share.

Every autoscaler (our engine in :mod:`controller.simulator.loop`, the baselines in
:mod:`controller.simulator.baselines` and :mod:`controller.simulator.flink`) is ticked with an
:class:`Observation` and what it last set (:class:`Current`), and may answer a :class:`Command`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, Protocol

from controller.core.snapshot import MetricsSnapshot


@dataclass(frozen=True)
class Command:
    """What an autoscaler asks of the job."""

    action: Literal["scale", "restart", "recover"]
    executors: int
    partitions: int | None = None
    reason: str = ""
    max_records_per_batch: int | None = None
    """Admission cap for the query a restart or recovery starts (records per batch)."""


@dataclass(frozen=True)
class Observation:
    """What an autoscaler sees at a tick: the metrics snapshot over its window, and the
    executors' CPU usage over that window (for CPU-based rules; None when unknown)."""

    snapshot: MetricsSnapshot
    cpu_seconds: float | None = None


@dataclass(frozen=True)
class Current:
    """What an autoscaler knows of the job besides the metrics: what it last set."""

    executors: int
    partitions: int


class Autoscaler(Protocol):
    """What the simulator's loop drives: a name, how often it ticks and over what window it
    looks (read-only: the engine's come from its policy), whether it recovers a dead driver
    itself, and the tick."""

    @property
    def name(self) -> str: ...
    @property
    def interval(self) -> float: ...
    @property
    def window(self) -> float: ...
    @property
    def auto_recover(self) -> bool: ...

    def tick(self, obs: Observation, now: float, cur: Current) -> Command | None: ...


def round_half_up(x: float) -> int:
    """Scala/Java ``math.round``: halves round up (Python's round() rounds them to even)."""
    return math.floor(x + 0.5)


def clamp(n: int, lo: int, hi: int) -> int:
    return max(lo, min(hi, n))
