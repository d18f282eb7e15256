"""Each baseline's rule on hand-computed cases (table-driven, named)."""

from __future__ import annotations

import math

import pytest

from contracts.policy import ScalingPolicySpec
from controller.core.snapshot import MetricsSnapshot, StageMetrics
from controller.simulator.baselines import (
    Current,
    DelayedScaleDown,
    DStream,
    Flink,
    FlinkVertex,
    Observation,
    dstream_processing_seconds,
    dstream_target,
    flink_apply_scale_down_interval,
    flink_processing_backlog,
    flink_scale,
    flink_target_capacity,
    flink_vertex_parallelism,
    hpa_rate_limit,
    hpa_recommend,
    hpa_stabilize,
    make_baseline,
    round_half_up,
)
from controller.simulator.model import JobModel

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
        (6000, 0, 0.6, 30, False, 10000),  # the scale-up threshold has no restart term
        (7000, 0, 1.3, 0, False, 7000),  # utilization clamped to 1
        (7000, 0, 0.0, 0, True, math.inf),  # utilization 0: infinite (no scale-down trigger)
    ],
    ids=["input-only", "catch-up", "restart-term", "no-restart", "clamp-1", "util-0"],
)
def test_flink_target_capacity(rate, lag, util, restart, with_restart, expected) -> None:
    assert flink_target_capacity(rate, lag, util, 60.0, restart, with_restart) == expected


@pytest.mark.parametrize(
    ("vertex", "factor", "expected"),
    [
        # keyed, 128 key groups: ceil(2 x 2.5) = 5 -> first divisor of 128 upwards: 8
        (FlinkVertex(0, 0, 2, keyed=True, upper_limit=64), 2.5, 8),
        # source with 8 partitions: 5 -> 8
        (FlinkVertex(0, 0, 2, source_partitions=8, upper_limit=8), 2.5, 8),
        # scale-down: ceil(8 x 0.4) = 4 divides 8
        (FlinkVertex(0, 0, 8, source_partitions=8, upper_limit=8), 0.4, 4),
        # scale-down 6 -> ceil(4.5) = 5: the search stops at the current 6, which divides 6: no
        # change (alignment blocks the scale-down)
        (FlinkVertex(0, 0, 6, source_partitions=6, upper_limit=8), 0.75, 6),
        # scale-up 8 -> 9 with vertex.max-parallelism 12: no divisor of 128 in 9..12; downwards
        # 128 // 8 = 16 > 128 // 9 = 14 gives 8 = current: blocked, stays 8
        (FlinkVertex(0, 0, 8, keyed=True, upper_limit=12), 1.1, 8),
        # source with 10 partitions, cap 4: 1 -> 3; no divisor of 10 in 3..4; downwards 2
        (FlinkVertex(0, 0, 1, source_partitions=10, upper_limit=4), 3.0, 2),
        # neither source nor keyed: not aligned, ceil(3 x 1.5) = 5
        (FlinkVertex(0, 0, 3, upper_limit=8), 1.5, 5),
        # clamped to vertex.max-parallelism
        (FlinkVertex(0, 0, 3, upper_limit=8), 10.0, 8),
    ],
    ids=[
        "up-key-groups",
        "up-source-partitions",
        "down-divisor",
        "down-blocked-by-alignment",
        "up-blocked-by-alignment",
        "downward-fallback",
        "unaligned",
        "upper-limit",
    ],
)
def test_flink_scale(vertex: FlinkVertex, factor: float, expected: int) -> None:
    assert flink_scale(vertex, factor) == expected


@pytest.mark.parametrize(
    ("vertex", "rate", "backlog", "expected"),
    [
        # 10,000 rows/s per busy second per subtask, 2 subtasks: true rate 20,000/s.
        # input 14,000 -> capacity 20,000 (+ restart term 0): exactly at target, inside band
        (FlinkVertex(300_000, 30.0, 2, keyed=True, upper_limit=64), 14_000, False, (2, False)),
        # input 30,000 -> capacity 42,857 -> ceil(2 x 42,857 / 20,000) = 5 -> divisor of 128: 8
        (FlinkVertex(300_000, 30.0, 2, keyed=True, upper_limit=64), 30_000, False, (8, True)),
        # source: 8 partitions; ceil(2 x 42,857 / 20,000) = 5 -> divisor of 8: 8
        (
            FlinkVertex(300_000, 30.0, 2, source_partitions=8, upper_limit=8),
            30_000,
            False,
            (8, True),
        ),
        # input 2,000 on 8 subtasks (80,000/s): ceil(8 x 2,857 / 80,000) = 1, but max scale-down
        # factor 0.6 keeps ceil(8 x 0.4) = 4
        (FlinkVertex(300_000, 30.0, 8, keyed=True, upper_limit=64), 2_000, False, (4, True)),
        # the same while processing a backlog: band 1.0 .. 0, so not outside (no scale-down)
        (FlinkVertex(300_000, 30.0, 8, keyed=True, upper_limit=64), 2_000, True, (4, False)),
    ],
    ids=["in-band", "scale-up-key-groups", "scale-up-source-cap", "scale-down-factor", "backlog"],
)
def test_flink_vertex(vertex: FlinkVertex, rate: float, backlog: bool, expected) -> None:
    got = flink_vertex_parallelism(
        vertex,
        rate,
        0.0,
        target=0.7,
        boundary=0.3,
        catch_up=60.0,
        restart=0.0,
        max_down_factor=0.6,
        backlog=backlog,
    )
    assert got == expected


@pytest.mark.parametrize(
    ("lag", "rate", "expected"),
    [(3000, 100, True), (500, 100, False), (10, 0, True), (0, 0, False), (10, None, False)],
    ids=["above", "below", "stalled", "idle", "no-rate"],
)
def test_flink_processing_backlog(lag: float, rate: float | None, expected: bool) -> None:
    assert flink_processing_backlog(lag, rate, 10.0) is expected


Step = tuple[float, int, bool, "tuple[int, bool] | None"]


@pytest.mark.parametrize(
    ("interval", "steps"),
    [
        # back inside the band (an in-band recommendation below the current) keeps the pending
        # scale-down; after the interval the max of the window wins, with its own band flag
        (100, [(0, 4, True, None), (50, 6, False, None), (100, 5, False, (6, False))]),
        # the max recommendation of the last interval, not of all time since the first trigger
        (
            100,
            [
                (0, 4, True, None),
                (30, 6, True, None),
                (60, 5, True, None),
                (100, 4, True, (6, True)),
                (131, 4, True, (5, True)),
            ],
        ),
        # a recommendation >= current clears it: the interval starts again
        (100, [(0, 4, True, None), (50, 8, False, None), (100, 4, True, None)]),
        (100, [(0, 4, True, None), (50, 9, True, (9, True)), (100, 4, True, None)]),
        # interval <= 0: no delay
        (0, [(0, 4, True, (4, True))]),
    ],
    ids=["band-reentry-keeps", "sliding-max", "equal-clears", "scale-up-clears", "no-interval"],
)
def test_flink_delayed_scale_down(interval: float, steps: list[Step]) -> None:
    d = DelayedScaleDown()
    for now, rec, outside, expected in steps:
        got = flink_apply_scale_down_interval(d, "v", now, 8, rec, outside, interval)
        assert got == expected, f"t={now}"


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
    assert not f.delayed.first  # a rescale clears every delayed scale-down
    assert f.tick(low, 110.0, Current(4, 4)) is None  # stabilizing: restart + 30 s + window


def _source_snap(rate: float) -> MetricsSnapshot:
    """One source stage on 6 executors, 12 partitions, 1,000 rows per busy second per subtask:
    a true rate of 6,000/s."""
    rows = rate * 30
    return MetricsSnapshot(
        job="t",
        observed_at=1.0,
        window_seconds=30.0,
        batches=30,
        arrival_rate=rate,
        backlog_records=0,
        executors=6,
        cores_per_executor=1,
        driver_up=True,
        stages=(
            StageMetrics(
                name="source", kind="source", partitions=12, rows=rows, busy_seconds=rows / 1000
            ),
        ),
    )


def test_flink_pending_scale_down_survives_band_reentry() -> None:
    """1,000/s in: outside the band, recommends 6 x 0.4 -> 3 (divides 12). 2,500/s: inside the
    band (2,500 <= 6,000 <= 6,250) but recommends ceil(6 x 3,571 / 6,000) = 4. The in-band 4 is
    the max of the window until it leaves it; the scale-down fires 100 s after the *first*
    trigger's window has dropped the in-band recommendation (t=160), not 100 s after the last
    re-entry (t=200, as when the re-entry reset the timer)."""
    f = Flink(1, 12, 64, catch_up=60, restart_time=0, stabilization=30, scale_down_interval=100)
    low, band = Observation(_source_snap(1_000)), Observation(_source_snap(2_500))
    cur = Current(6, 2)
    assert f.tick(low, 0.0, cur) is None
    assert f.tick(band, 50.0, cur) is None
    assert f.delayed.first == {"source": 0.0}  # still pending
    assert f.tick(low, 100.0, cur) is None  # the window's max is the in-band 4: no rescale
    cmd = f.tick(low, 160.0, cur)
    assert cmd is not None and (cmd.executors, cmd.partitions) == (3, 2)


def test_flink_time_constants_scale_with_the_metrics_window() -> None:
    """Every Flink duration x (our window / Flink's 15 min): 30 s -> 1/30."""
    f, _, _ = make_baseline("flink", JobModel(), ScalingPolicySpec(), 1.0, 1.0)
    assert isinstance(f, Flink)
    assert f.window == 30.0
    assert f.scale_down_interval == pytest.approx(3600 / 30)
    assert f.stabilization == pytest.approx(300 / 30)
    assert f.backlog_lag_threshold == pytest.approx(300 / 30)
