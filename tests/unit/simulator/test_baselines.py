"""Each baseline's rule on hand-computed cases (table-driven, named)."""

from __future__ import annotations

import pytest

from controller.core.snapshot import MetricsSnapshot, StageMetrics
from controller.simulator.baselines import (
    Current,
    DStream,
    Flink,
    FlinkVertex,
    Observation,
    align_up,
    dstream_processing_seconds,
    dstream_target,
    flink_target_capacity,
    flink_vertex_parallelism,
    hpa_rate_limit,
    hpa_recommend,
    hpa_stabilize,
    round_half_up,
)

# --- HPA -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("busy", "ready", "current", "expected"),
    [
        (1.4, 2, 2, 2),  # utilization 0.7 = target: hold
        (1.5, 2, 2, 2),  # 0.75 / 0.7 = 1.07: within 10% tolerance
        (1.9, 2, 2, 3),  # 0.95 / 0.7 = 1.36: ceil(1.9 / 0.7) = ceil(2.71) = 3
        (0.5, 4, 4, 1),  # 0.125 / 0.7: ceil(0.5 / 0.7) = 1
        (2.8, 2, 4, 4),  # 2 ready of 4 (2 starting): ceil(2.8 / 0.7) = 4
        (1.0, 0, 3, 3),  # no ready pod: no metric, keep
    ],
    ids=["at-target", "within-tolerance", "scale-up", "scale-down", "pending-pods", "no-pods"],
)
def test_hpa_recommend(busy: float, ready: int, current: int, expected: int) -> None:
    assert hpa_recommend(busy, ready, current, 0.7, 0.1) == expected


@pytest.mark.parametrize(
    ("rec", "current", "window", "expected"),
    [
        (6, 4, [2, 3], 6),  # scale-up is immediate
        (2, 6, [5, 3], 5),  # scale-down only to the max recommendation of the window
        (2, 6, [], 2),  # empty window
        (4, 4, [8], 4),  # no change
    ],
    ids=["up-immediate", "down-stabilized", "down-empty-window", "steady"],
)
def test_hpa_stabilize(rec: int, current: int, window: list[int], expected: int) -> None:
    assert hpa_stabilize(rec, current, window) == expected


@pytest.mark.parametrize(
    ("desired", "current", "expected"),
    [(20, 2, 6), (20, 10, 20), (3, 2, 3)],
    ids=["plus-four-pods", "double", "under-limit"],
)
def test_hpa_rate_limit(desired: int, current: int, expected: int) -> None:
    assert hpa_rate_limit(desired, current) == expected


# --- Spark DStream -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("avg", "interval", "live", "requested", "expected"),
    [
        (0.9, 1.0, 2, 2, 3),  # ratio 0.9 >= 0.9: max(round(0.9), 1) = 1 more
        (2.5, 1.0, 2, 2, 5),  # ratio 2.5: Scala round half up = 3 more
        (31.0, 1.0, 3, 3, 8),  # capped at max
        (1.2, 1.0, 2, 5, 3),  # registered + 1: the requested total drops from 5 to 3
        (0.5, 1.0, 4, 4, 4),  # between the ratios: nothing
        (0.3, 1.0, 4, 4, 3),  # ratio <= 0.3: kill one
        (0.2, 1.0, 3, 5, 4),  # the kill lowers the requested total (5), not the registered (3)
        (0.1, 1.0, 1, 3, 3),  # only min registered: no kill, pending ones still come
        (0.1, 1.0, 1, 1, 1),  # never below min
        (5.0, 10.0, 2, 2, 2),  # ratio 0.5 with a 10 s interval
        (0.8999, 1.0, 2, 2, 2),  # 899 ms (whole ms, Long division): below 0.9
        (0.3009, 1.0, 4, 4, 3),  # 300 ms: at the down ratio
    ],
    ids=[
        "at-up-ratio",
        "round-half-up",
        "max",
        "up-from-registered",
        "band",
        "kill-one",
        "kill-lowers-requested",
        "min-registered",
        "min",
        "long-interval",
        "whole-ms-below-up",
        "whole-ms-at-down",
    ],
)
def test_dstream_rule(avg: float, interval: float, live: int, requested: int, expected: int):
    assert dstream_target(avg, interval, live, requested, 1, 8) == expected


@pytest.mark.parametrize(
    ("batch", "overhead", "expected"),
    [(1.3, 0.3, 1.0), (0.55, 0.3, 0.25), (0.3, 0.3, 0.0), (0.8, None, 0.8)],
    ids=["busy", "light", "overhead-only", "no-overhead-metric"],
)
def test_dstream_processing_excludes_driver_overhead(
    batch: float, overhead: float | None, expected: float
) -> None:
    """``processingDelay`` runs from the first job's start: the driver overhead is not in it."""
    assert dstream_processing_seconds(batch, overhead) == pytest.approx(expected)


def _dstream_snap(batch: float, overhead: float, executors: int) -> MetricsSnapshot:
    return MetricsSnapshot(
        job="t",
        observed_at=1.0,
        window_seconds=60.0,
        trigger_interval_seconds=1.0,
        batches=60,
        batch_duration_seconds=batch,
        overhead_seconds=overhead,
        executors=executors,
        driver_up=True,
    )


@pytest.mark.parametrize(
    ("batch", "overhead", "expected"),
    [
        # 0.55 s batches of which 0.3 s driver overhead: processing 0.25 s, ratio 0.25 -> kill
        # one (counting the overhead, 0.55, would hold)
        (0.55, 0.3, 3),
        # 1.1 s batches, 0.3 s overhead: processing 0.8 s, ratio 0.8 -> hold (1.1 would add 1)
        (1.1, 0.3, None),
        # 1.3 s batches, 0.3 s overhead: processing 1.0 s, ratio 1.0 -> one more
        (1.3, 0.3, 5),
    ],
    ids=["down-without-overhead", "hold-without-overhead", "up"],
)
def test_dstream_ratio_excludes_driver_overhead(
    batch: float, overhead: float, expected: int | None
) -> None:
    cmd = DStream(1, 8).tick(Observation(_dstream_snap(batch, overhead, 4)), 60.0, Current(4, 2))
    assert (cmd.executors if cmd is not None else None) == expected


def test_round_half_up_matches_scala() -> None:
    assert [round_half_up(x) for x in (0.5, 1.5, 2.5, 2.49)] == [1, 2, 3, 2]


# --- Flink autoscaler ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rate", "lag", "util", "restart", "with_restart", "expected"),
    [
        (7000, 0, 0.7, 0, False, 10000),  # input / utilization
        (7000, 60000, 0.7, 0, False, 11000),  # + lag / catch-up (60 s)
        (6000, 0, 0.6, 30, True, 13000),  # + input x restart / catch-up = 3000
    ],
    ids=["input-only", "catch-up", "restart-term"],
)
def test_flink_target_capacity(rate, lag, util, restart, with_restart, expected) -> None:
    assert flink_target_capacity(rate, lag, util, 60.0, restart, with_restart) == expected


@pytest.mark.parametrize(
    ("vertex", "rate", "expected"),
    [
        # 10,000 rows/s per busy second per subtask, 2 subtasks: true rate 20,000/s.
        # input 14,000 -> capacity 20,000 (+ restart term 0): exactly at target, inside band
        (FlinkVertex(300_000, 30.0, 2, 64, 128), 14_000, (2, False)),
        # input 30,000 -> capacity 42,857 -> ceil(2 x 42,857 / 20,000) = 5 -> divisor of 128: 8
        (FlinkVertex(300_000, 30.0, 2, 64, 128), 30_000, (8, True)),
        # source: 8 partitions; ceil(2 x 42,857 / 20,000) = 5 -> divisor of 8: 8
        (FlinkVertex(300_000, 30.0, 2, 8, 8), 30_000, (8, True)),
        # input 2,000 on 8 subtasks (80,000/s): ceil(8 x 2,857 / 80,000) = 1, but max scale-down
        # factor 0.6 keeps ceil(8 x 0.4) = 4
        (FlinkVertex(300_000, 30.0, 8, 64, 128), 2_000, (4, True)),
    ],
    ids=["in-band", "scale-up-key-groups", "scale-up-source-cap", "scale-down-factor"],
)
def test_flink_vertex(vertex: FlinkVertex, rate: float, expected: tuple[int, bool]) -> None:
    got = flink_vertex_parallelism(
        vertex,
        rate,
        0.0,
        target=0.7,
        boundary=0.3,
        catch_up=60.0,
        restart=0.0,
        max_down_factor=0.6,
    )
    assert got == expected


@pytest.mark.parametrize(
    ("p", "of", "upper", "expected"),
    [(3, 8, 8, 4), (5, 128, 64, 8), (9, 8, 8, 8), (3, 7, 7, 7)],
    ids=["to-4", "power-of-two", "capped", "prime"],
)
def test_align_up(p: int, of: int, upper: int, expected: int) -> None:
    assert align_up(p, of, upper) == expected


def _snap(rate: float, busy: float) -> MetricsSnapshot:
    rows = rate * 30
    return MetricsSnapshot(
        job="t",
        observed_at=1.0,
        window_seconds=30.0,
        batches=30,
        arrival_rate=rate,
        backlog_records=0,
        executors=8,
        cores_per_executor=1,
        driver_up=True,
        stages=(
            StageMetrics(name="source", kind="source", partitions=8, rows=rows, busy_seconds=busy),
            StageMetrics(name="agg", kind="stateful", partitions=8, rows=rows, busy_seconds=busy),
        ),
    )


def test_flink_defers_scale_down_over_the_interval() -> None:
    f = Flink(1, 8, 64, catch_up=60, restart_time=10, stabilization=30, scale_down_interval=100)
    low = Observation(_snap(2_000, 6.0))  # 10,000 rows/busy-s per subtask, 2,000/s in
    cur = Current(8, 8)
    assert f.tick(low, 0.0, cur) is None  # first scale-down trigger: deferred
    assert f.tick(low, 50.0, cur) is None
    cmd = f.tick(low, 100.0, cur)
    assert cmd is not None and cmd.action == "restart"
    assert (cmd.executors, cmd.partitions) == (4, 4)  # max scale-down factor 0.6: 8 -> 4
