"""decide(): table tests, one named case per row — policy / history / observed / expected."""

from __future__ import annotations

from typing import Any

import pytest

from contracts.history import HistoryEntry, ScalingHistory
from contracts.policy import ScalingPolicySpec
from controller.core import (
    Action,
    BottleneckKind,
    MetricsSnapshot,
    Reason,
    StageMetrics,
    decide,
    record,
)
from tests.unit.core.factories import (
    COOLDOWN_CASES,
    NOW,
    Case,
    capped,
    check,
    history,
    policy,
    snapshot,
    state_heavy,
    stateless_heavy,
)


def _acted(reason: str, executors: int, rate_before: float, expected: float,
           ago: float) -> ScalingHistory:
    """One action ``ago`` seconds before NOW: a scale to ``executors`` for ``reason``, from
    ``rate_before`` records/s, promising ``expected``."""
    return ScalingHistory(entries=(HistoryEntry(
        time=NOW - ago, kind="action", action="scale", executors=executors, reason=reason,
        rate_before=rate_before, expected_rate=expected),))


def _sized(executors: int, expected: float, partitions: int | None = None) -> ScalingHistory:
    """One recommendation 100 s before NOW: ``executors`` expected to carry ``expected``
    records/s (what a recovery sizes each executor on), at ``partitions`` if given."""
    return ScalingHistory(entries=(HistoryEntry(
        time=NOW - 100, kind="recommendation", executors=executors, expected_rate=expected,
        partitions=partitions),))


def _contended(*, arrival: float, executors: int, processed: float) -> MetricsSnapshot:
    """Every slot busy all window, yet only ``processed`` records/s: CPU contention."""
    rows = processed * 30
    stages = (
        StageMetrics(
            name="parse", kind="source", partitions=8, rows=rows, busy_seconds=30.0 * executors
        ),
    )
    return snapshot(
        arrival=arrival,
        executors=executors,
        backlog=200_000,
        age=20,
        processed_rate=processed,
        stages=stages,
    )


def _skewed(*, partitions: int, executors: int) -> MetricsSnapshot:
    """The reference job behind its load, its stateful stage's longest task 6x the median."""
    base = snapshot(
        arrival=20_000, executors=executors, partitions=partitions, backlog=100_000, age=10
    )
    stages = tuple(
        st.model_copy(update={"max_task_seconds": 3.0, "median_task_seconds": 0.5})
        if st.kind == "stateful"
        else st
        for st in base.stages
    )
    return base.model_copy(update={"stages": stages})


def _giant_batch(**kw: Any) -> MetricsSnapshot:
    """Under-provisioned, no admission cap: the last batch committed 200 s ago and the one
    running since then (190 s, 1.9 M records) has not finished, so the window holds no batch."""
    fields: dict[str, Any] = {
        "arrival": 20_000,
        "executors": 2,
        "backlog": 4e6,
        "age": 200,
        "observed_at": NOW - 200,
        "batches": 0,
        "stages": (),
        "processed_rate": None,
        "batch_duration_seconds": None,
        "overhead_seconds": None,
        "seconds_since_progress": 200,
        "batch_in_flight_seconds": 190,
        "batch_in_flight_rows": 1.9e6,
    }
    fields.update(kw)
    return snapshot(**fields)


HOLD, SCALE, REPART, RECOVER = Action.HOLD, Action.SCALE, Action.REPARTITION, Action.RECOVER

def _window_of_recommendations(executors: int) -> ScalingHistory:
    """A whole stabilization window (130, 90 and 30 s ago) that recommended ``executors``."""
    return history(*((ago, "recommendation", executors) for ago in (130, 90, 30)))


CASES = [
    Case("within band holds", snapshot(), (HOLD, Reason.WITHIN_BAND, None, None)),
    Case(
        "an admission cap that binds is lifted by a restart as the job is",
        capped(),
        (REPART, Reason.ADMISSION_CAP_BOUND, 3, 3),
        policy=policy(executors={"min": 1, "max": 3}),
        message_has="the admission cap binds",
    ),
    Case(
        "idle at the minimum says so",
        snapshot(arrival=500),
        (HOLD, Reason.AT_MIN, None, None),
        message_has="executors.min=1",
    ),
    Case(
        "stateless bottleneck scales out in place, one step",
        stateless_heavy(arrival=20_000, backlog=50_000, age=10),
        (SCALE, Reason.SCALE_OUT, 4, None),
        diagnosis=BottleneckKind.TASK_SLOTS,
    ),
    Case(
        "stateful stage at its partition cap repartitions (the SEEP move)",
        snapshot(arrival=20_000, executors=2, partitions=2, backlog=100_000, age=10),
        (REPART, Reason.REPARTITION_OUT, 4, 4),
        diagnosis=BottleneckKind.STATE_PARTITIONS,
        message_has="repartition state 2 -> 4",
    ),
    Case(
        "a restart is planned with the downtime the runner measured for the last one, if longer",
        snapshot(
            arrival=20_000,
            executors=2,
            partitions=2,
            backlog=100_000,
            age=10,
            last_restart_seconds=25.0,
        ),
        (REPART, Reason.REPARTITION_OUT, 4, 4),
        message_has="est. 25 s down, as long as the last restart took",
    ),
    Case(
        "stateful stage with spare partitions restarts to spread state",
        snapshot(arrival=20_000, executors=2, partitions=8, backlog=100_000, age=10),
        (REPART, Reason.REPARTITION_OUT, 4, 8),
        message_has="restart at a batch boundary",
    ),
    Case(
        "scale-in waits for a full window of lower recommendations",
        snapshot(arrival=2_000, executors=4, partitions=4),
        (HOLD, Reason.SCALE_DOWN_DEFERRED, None, None),
    ),
    Case(
        "scale-in after a full window, in one step to the highest recommendation in it",
        snapshot(arrival=2_000, executors=4, partitions=4),
        (SCALE, Reason.SCALE_IN, 3, None),
        history=history(
            (130, "recommendation", 2), (90, "recommendation", 3), (30, "recommendation", 1)
        ),
    ),
    Case(
        "a dip's first recommendation, measured over a window that still held the load before "
        "it, does not set the scale-in once the dip has lasted a window",
        snapshot(arrival=2_000, executors=4, partitions=4),
        (SCALE, Reason.SCALE_IN, 1, None),
        history=history(
            (120, "recommendation", 3),
            (100, "recommendation", 1),
            (70, "recommendation", 1),
            (40, "recommendation", 1),
            (10, "recommendation", 1),
        ),
    ),
    Case(
        "a job that keeps up at 94% busy (a noise peak past utilization.high) is not restarted "
        "for headroom: nothing piles up while it waits, and a restart later stops it no longer",
        snapshot(arrival=75_000, executors=8, partitions=8),
        (HOLD, Reason.WITHIN_LAG_BUDGET, None, None),
        policy=policy(executors={"min": 1, "max": 20}),
        message_has="but they keep up",
    ),
    Case(
        "a catch-up's surplus: a quarter fewer executors carry the arrival at the target, so "
        "the rest goes once a whole window recommended it, though 44% busy is within the band",
        snapshot(arrival=50_000, executors=16, partitions=16),
        (SCALE, Reason.SCALE_IN, 8, None),
        history=_window_of_recommendations(8),
        message_has="the other 8 are a surplus",
    ),
    Case(
        "a catch-up's surplus waits for a whole window of lower recommendations",
        snapshot(arrival=50_000, executors=16, partitions=16),
        (HOLD, Reason.SCALE_DOWN_DEFERRED, None, None),
        message_has="are a surplus",
    ),
    Case(
        "no surplus where the smaller layout would run past the target (8 partitions over 4 "
        "executors: 88% busy), so the band holds",
        snapshot(arrival=35_000, executors=8, partitions=8),
        (HOLD, Reason.WITHIN_BAND, None, None),
        history=_window_of_recommendations(4),
    ),
    Case(
        "a recommendation at the current size restarts the stabilization window",
        snapshot(arrival=2_000, executors=4, partitions=4),
        (HOLD, Reason.SCALE_DOWN_DEFERRED, None, None),
        history=history(
            (130, "recommendation", 1), (60, "recommendation", 4), (30, "recommendation", 1)
        ),
    ),
    Case(
        "no scale-in while catching up",
        snapshot(arrival=2_000, executors=4, partitions=4, backlog=10_000, age=20),
        (HOLD, Reason.CATCHING_UP, None, None),
    ),
    Case(
        "over capacity, but acting one evaluation later still keeps the lag under the SLO",
        stateless_heavy(arrival=12_000, backlog=20_000, age=2),
        (HOLD, Reason.WITHIN_LAG_BUDGET, None, None),
        message_has="one evaluation later",
    ),
    Case(
        "at the policy's max, hold and say so",
        stateless_heavy(arrival=30_000, executors=2, backlog=50_000, age=10),
        (HOLD, Reason.AT_MAX, None, None),
        policy=policy(executors={"min": 1, "max": 2}),
        message_has="max 2",
    ),
    Case(
        "fixed driver overhead dominates the batches the SLO allows: executors cannot help",
        snapshot(arrival=5_000, overhead_seconds=0.95),
        (HOLD, Reason.DRIVER_OVERHEAD_BOUND, None, None),
        policy=policy(lag={"sloSeconds": 2}),
        diagnosis=BottleneckKind.DRIVER_OVERHEAD,
        message_has="longer trigger",
    ),
    Case(
        "the same overhead under a 30 s SLO: batches may grow to 15 s and amortize it",
        snapshot(arrival=5_000, overhead_seconds=0.95),
        (HOLD, Reason.WITHIN_BAND, None, None),
        diagnosis=BottleneckKind.NONE,
    ),
    Case(
        "overhead dominates and the state is at its cap: scale in place, never repartition for it",
        snapshot(
            arrival=20_000,
            executors=2,
            partitions=2,
            backlog=100_000,
            age=10,
            overhead_seconds=0.6,
            batch_duration_seconds=1.0,
        ),
        (SCALE, Reason.SCALE_OUT, 8, None),
        policy=policy(lag={"sloSeconds": 2}),
        diagnosis=BottleneckKind.DRIVER_OVERHEAD,
    ),
    Case(
        "memory pressure within the band: more executors, so the memory in use spreads",
        snapshot(arrival=5_000, executors=2, partitions=8, memory_used_ratio=0.95, failed_tasks=3),
        (SCALE, Reason.SCALE_OUT_MEMORY, 3, None),
        diagnosis=BottleneckKind.MEMORY,
        message_has="about 63% in use on 3",
    ),
    Case(
        "memory pressure is never met with a scale-in, even after a full window of fewer",
        snapshot(arrival=2_000, executors=4, partitions=4, memory_used_ratio=0.95, failed_tasks=3),
        (SCALE, Reason.SCALE_OUT_MEMORY, 6, None),
        history=history(
            (130, "recommendation", 2), (90, "recommendation", 3), (30, "recommendation", 1)
        ),
        diagnosis=BottleneckKind.MEMORY,
    ),
    Case(
        "memory pressure below executors.min (no executor yet): straight to the minimum",
        snapshot(arrival=0.0, executors=0, memory_used_ratio=1.0, failed_tasks=1,
                 processed_rate=1.0, stages=(
                     StageMetrics(name="source", kind="source", partitions=1, rows=5.0,
                                  busy_seconds=0.04),
                     StageMetrics(name="counts", kind="stateful", partitions=1, rows=5.0,
                                  busy_seconds=0.04, state_bytes=0.0))),
        (SCALE, Reason.SCALE_OUT_MEMORY, 2, None),
        policy=policy(executors={"min": 2, "max": 8}),
        diagnosis=BottleneckKind.MEMORY,
    ),
    Case(
        "a full storage memory without failed tasks is a full cache: reported, not acted on",
        snapshot(arrival=5_000, executors=2, partitions=8, memory_used_ratio=0.95),
        (HOLD, Reason.SCALE_DOWN_DEFERRED, None, None),
        diagnosis=BottleneckKind.MEMORY,
    ),
    Case(
        "memory pressure at executors.max: hold, and say more memory per executor helps",
        snapshot(arrival=5_000, executors=8, partitions=8, memory_used_ratio=0.95, failed_tasks=3),
        (HOLD, Reason.MEMORY_PRESSURE, None, None),
        diagnosis=BottleneckKind.MEMORY,
        message_has="spark.executor.memory",
    ),
    Case(
        "a hot key in one wave of tasks: more executors do not shorten it (Skewed)",
        _skewed(partitions=2, executors=2),
        (HOLD, Reason.SKEWED, None, None),
        diagnosis=BottleneckKind.SKEW,
        message_has="hot key",
    ),
    Case(
        "skew with several waves of tasks: more slots still help, the scale-out goes ahead",
        _skewed(partitions=8, executors=2),
        (REPART, Reason.REPARTITION_OUT, 4, 8),
        diagnosis=BottleneckKind.SKEW,
    ),
    Case(
        "read stage at its source-partition cap: suggest more partitions",
        stateless_heavy(arrival=40_000, executors=2, source_partitions=2, backlog=1e5, age=10),
        (HOLD, Reason.SOURCE_PARTITION_BOUND, None, None),
        diagnosis=BottleneckKind.SOURCE_PARTITIONS,
        message_has="minPartitions",
    ),
    Case(
        "repartition disabled: in-place help for the stateless stage, and the cap is named",
        snapshot(arrival=40_000, executors=2, partitions=2, backlog=100_000, age=10),
        (SCALE, Reason.SCALE_OUT, 8, None),
        policy=policy(partitions={"repartition": False}),
        message_has="repartition is disabled",
    ),
    Case(
        "stateful stage at its cap, repartition disabled, nothing else helps: say so",
        state_heavy(arrival=20_000, executors=2, partitions=2, backlog=100_000, age=10),
        (HOLD, Reason.PARTITION_BOUND_NO_REPARTITION, None, None),
        policy=policy(partitions={"repartition": False}),
        diagnosis=BottleneckKind.STATE_PARTITIONS,
        message_has="repartition is disabled",
    ),
    Case(
        "unknown state size: no repartition, and the message says why",
        snapshot(
            arrival=40_000, executors=2, partitions=2, backlog=100_000, age=10, state_bytes=None
        ),
        (SCALE, Reason.SCALE_OUT, 8, None),
        message_has="state size is unknown",
    ),
    Case(
        "recommend mode decides but does not act",
        stateless_heavy(arrival=20_000, backlog=50_000, age=10),
        (SCALE, Reason.SCALE_OUT, 4, None),
        policy=policy(mode="recommend"),
    ),
    Case(
        "ineffective scale-out is blocked (Dhalion's blacklist)",
        _contended(arrival=20_000, executors=3, processed=9_500),
        (HOLD, Reason.BLOCKED_INEFFECTIVE, None, None),
        history=_acted("ScaleOut", 3, 9_000, 20_000, ago=90),
    ),
    Case(
        "a scale-in is not judged ineffective: the burst that came back scales out",
        stateless_heavy(arrival=20_000, backlog=50_000, age=10),
        (SCALE, Reason.SCALE_OUT, 4, None),
        history=_acted("ScaleIn", 1, 9_000, 20_000, ago=200),
    ),
    Case(
        "a blocked in-place move does not block the repartition that spreads state",
        snapshot(arrival=20_000, executors=2, partitions=2, backlog=100_000, age=10),
        (REPART, Reason.REPARTITION_OUT, 4, 4),
        history=ScalingHistory(
            entries=(
                HistoryEntry(
                    time=NOW - 60,
                    kind="blocked",
                    executors=4,
                    reason="BlockedIneffective",
                    until=NOW + 600,
                ),
            )
        ),
    ),
    Case(
        "an in-place scale-out found ineffective now does not hold the repartition that spreads "
        "state (more executors credited the 30% of the gain it delivered)",
        snapshot(arrival=20_000, executors=2, partitions=2, backlog=100_000, age=10),
        (REPART, Reason.REPARTITION_OUT, 6, 6),
        history=_acted("ScaleOut", 2, 19_900, 60_000, ago=90),
        message_has="delivered 30% of the gain",
    ),
    Case(
        "a blocked repartition to those partitions stays blocked until it expires",
        snapshot(arrival=20_000, executors=2, partitions=2, backlog=100_000, age=10),
        (HOLD, Reason.BLOCKED_INEFFECTIVE, None, None),
        history=ScalingHistory(
            entries=(
                HistoryEntry(
                    time=NOW - 60,
                    kind="blocked",
                    executors=4,
                    partitions=4,
                    reason="BlockedIneffective",
                    until=NOW + 600,
                ),
            )
        ),
    ),
    Case(
        "recent direction changes lengthen the scale-in window (a full base window is not enough)",
        snapshot(arrival=2_000, executors=4, partitions=4),
        (HOLD, Reason.SCALE_DOWN_DEFERRED, None, None),
        history=history(
            (400, "action", 2),
            (300, "action", 4),
            (250, "action", 2),
            (200, "action", 4),
            (130, "recommendation", 2),
            (90, "recommendation", 3),
            (30, "recommendation", 1),
        ),
        message_has="grown for 2 recent direction change(s)",
    ),
    Case(
        "driver down: recover from the checkpoint, sized to catch up",
        snapshot(arrival=10_000, executors=2, driver_up=False, backlog=300_000, age=30),
        (RECOVER, Reason.RECOVER_FAILURE, 3, None),
        history=_sized(2, 12_000),
        diagnosis=BottleneckKind.FAILURE,
        message_has="drain",
    ),
    Case(
        "a recovery never restores fewer executors than ran the job: the batch in flight "
        "replays as planned for them (the catch-up alone asks for 1)",
        snapshot(arrival=2_000, executors=2, driver_up=False, backlog=40_000, age=10),
        (RECOVER, Reason.RECOVER_FAILURE, 2, None),
        history=_sized(2, 24_000),
        diagnosis=BottleneckKind.FAILURE,
        message_has="2 executor(s) as before the failure, not 1",
    ),
    Case(
        "a recovery keeps the checkpoint's state partitions where nothing measured shows they "
        "bound the catch-up: a repartition at its start would lengthen the outage",
        snapshot(arrival=10_000, executors=2, partitions=2, driver_up=False, backlog=300_000,
                 age=30, stages=(), processed_rate=None, batches=0,
                 batch_duration_seconds=None),
        (RECOVER, Reason.RECOVER_FAILURE, 3, None),
        history=_sized(2, 12_000, 2),
        diagnosis=BottleneckKind.FAILURE,
        message_has="2 state partitions kept: no measured stage cost",
    ),
    Case(
        "a recovery keeps the state partitions whose layout carries the catch-up rate",
        snapshot(arrival=10_000, executors=2, partitions=2, driver_up=False, backlog=600_000,
                 age=30),
        (RECOVER, Reason.RECOVER_FAILURE, 4, None),
        history=_sized(2, 12_000),
        diagnosis=BottleneckKind.FAILURE,
        message_has="2 state partitions kept: at them 4 executor(s) carry 24,833 records/s",
    ),
    Case(
        "a recovery repartitions where the catch-up needs it: the state partitions bound the "
        "rate it must reach",
        snapshot(arrival=10_000, executors=2, partitions=2, driver_up=False, backlog=1_500_000,
                 age=30),
        (RECOVER, Reason.RECOVER_FAILURE, 7, 7),
        history=_sized(2, 12_000),
        diagnosis=BottleneckKind.FAILURE,
        message_has="with 7 executor(s) and 7 state partitions",
    ),
    Case(
        "executors lost with their node: beyond Spark's same-count replacement, to catch up",
        snapshot(arrival=10_000, executors=1, target_executors=2, backlog=300_000, age=40,
                 executors_lost=1, seconds_since_executor_loss=5),
        (SCALE, Reason.EXECUTORS_LOST, 3, None),
        history=_sized(2, 12_000),
        diagnosis=BottleneckKind.FAILURE,
        message_has="2 -> 3 executors",
    ),
    Case(
        "after acting on a loss, the batches it slowed are sized on nothing while it settles",
        snapshot(arrival=10_000, executors=1, target_executors=3, backlog=600_000, age=70,
                 executors_lost=1, seconds_since_executor_loss=20),
        (HOLD, Reason.EXECUTORS_LOST, None, None),
        history=ScalingHistory(entries=(
            HistoryEntry(time=NOW - 100, kind="recommendation", executors=2,
                         expected_rate=12_000),
            HistoryEntry(time=NOW - 15, kind="action", action="scale", executors=3,
                         reason=Reason.EXECUTORS_LOST.value),
        )),
        message_has="scaled to 3 for it",
    ),
    Case(
        "stalled job (no commit for long while data waits) is a failure",
        snapshot(arrival=5_000, seconds_since_progress=300, backlog=1e6, age=300),
        (RECOVER, Reason.RECOVER_FAILURE, 1, None),
        diagnosis=BottleneckKind.FAILURE,
    ),
    Case(
        "a driver that dies after a repartition is a new failure, not the repartition",
        snapshot(arrival=5_000, driver_up=False, seconds_since_progress=None, stages=()),
        (RECOVER, Reason.RECOVER_FAILURE, 1, None),
        history=ScalingHistory(
            entries=(HistoryEntry(time=NOW - 50, kind="action", action="repartition", executors=1),)
        ),
    ),
    Case(
        "a long batch in flight: not stale, not failed, under-provisioned -> scale out on it",
        _giant_batch(),
        (SCALE, Reason.SCALE_OUT, 8, None),
        diagnosis=BottleneckKind.TASK_SLOTS,
        message_has="scale out 2 -> 8",
    ),
    Case(
        "nothing committed in the window, a batch 20 s in flight over known rows, the arrival "
        "from the source -> scale out before it commits",
        snapshot(
            arrival=50_000,
            executors=1,
            backlog=None,
            age=None,
            batches=0,
            stages=(),
            processed_rate=None,
            batch_duration_seconds=None,
            overhead_seconds=None,
            seconds_since_progress=None,
            batch_in_flight_seconds=20,
            batch_in_flight_rows=45_000,
        ),
        (SCALE, Reason.SCALE_OUT, 4, None),
        message_has="need 50,000 records/s",
    ),
    Case(
        "a long batch in flight of unreported size: sized on the backlog, at most its records",
        _giant_batch(batch_in_flight_rows=None),
        (SCALE, Reason.SCALE_OUT, 8, None),
    ),
    Case(
        "a long batch in flight beside a window of batches: their cost still sizes the job",
        snapshot(
            arrival=20_000,
            executors=2,
            partitions=2,
            backlog=4e6,
            age=60,
            batch_in_flight_seconds=50,
            batch_in_flight_rows=1.9e6,
        ),
        (REPART, Reason.REPARTITION_OUT, 8, 8),
        diagnosis=BottleneckKind.STATE_PARTITIONS,
    ),
    Case(
        "a batch in flight within the SLO's batch budget and none completed: wait for it",
        _giant_batch(
            batch_in_flight_seconds=5, seconds_since_progress=10, observed_at=NOW - 10, age=10
        ),
        (HOLD, Reason.INSUFFICIENT_DATA, None, None),
    ),
    Case(
        "no batch in flight and no commit for long while data waits: still a failure",
        _giant_batch(batch_in_flight_seconds=None, batch_in_flight_rows=None),
        (RECOVER, Reason.RECOVER_FAILURE, 2, None),
        diagnosis=BottleneckKind.FAILURE,
        message_has="no batch reported in flight",
    ),
    Case(
        "a batch in flight that started long after the last commit does not explain the stall",
        _giant_batch(batch_in_flight_seconds=10),
        (RECOVER, Reason.RECOVER_FAILURE, 2, None),
        diagnosis=BottleneckKind.FAILURE,
        message_has="10 s of it explained by the batch in flight",
    ),
    Case(
        "driver down while it had reported a batch in flight: recover",
        _giant_batch(driver_up=False),
        (RECOVER, Reason.RECOVER_FAILURE, 2, None),
        diagnosis=BottleneckKind.FAILURE,
        message_has="does not answer",
    ),
    Case(
        "a repartition whose first batch already outlasts the SLO's budget: stop waiting, size",
        _giant_batch(batch_in_flight_seconds=40, seconds_since_progress=50, observed_at=NOW - 50),
        (SCALE, Reason.SCALE_OUT, 8, None),
        history=ScalingHistory(
            entries=(
                HistoryEntry(
                    time=NOW - 60, kind="action", action="repartition", executors=2, partitions=8
                ),
            )
        ),
    ),
    Case(
        "a batch in flight since before the repartition does not end the wait",
        _giant_batch(),
        (HOLD, Reason.ACTION_IN_PROGRESS, None, None),
        history=ScalingHistory(
            entries=(
                HistoryEntry(
                    time=NOW - 60, kind="action", action="repartition", executors=2, partitions=8
                ),
            )
        ),
    ),
    Case(
        "a recovery in flight is waited for",
        snapshot(arrival=5_000, driver_up=False, seconds_since_progress=20),
        (HOLD, Reason.ACTION_IN_PROGRESS, None, None),
        history=ScalingHistory(
            entries=(HistoryEntry(time=NOW - 15, kind="action", action="recover", executors=2),)
        ),
    ),
    Case(
        "a repartition in flight is waited for, not mistaken for a failure",
        snapshot(arrival=5_000, seconds_since_progress=20),
        (HOLD, Reason.ACTION_IN_PROGRESS, None, None),
        history=ScalingHistory(
            entries=(HistoryEntry(time=NOW - 15, kind="action", action="repartition", executors=2),)
        ),
    ),
    Case(
        "a burst due in 20 s that reacting met late is met ahead (test_anticipation.py)",
        snapshot(arrival=10_000, executors=2),
        (Action.SCALE, Reason.ANTICIPATED_BURST, 8, None),
        history=ScalingHistory(
            entries=tuple(
                HistoryEntry(
                    time=NOW - ago + back,
                    kind="action",
                    action="scale",
                    executors=2 if back else 8,
                    executors_before=8 if back else 2,
                    reason=(Reason.SCALE_IN if back else Reason.SCALE_OUT).value,
                    backlog_age_seconds=None if back else 25.0,
                )
                for ago in (430, 280, 130)
                for back in (0, 70)  # each burst scaled out, then in 70 s later
            )
        ),
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_decide(case: Case) -> None:
    check(case)


HOSTILE = [
    ("empty snapshot", MetricsSnapshot(job="j"), Reason.NO_METRICS),
    ("NaN arrival rate", snapshot(arrival=float("nan")), Reason.NO_METRICS),
    ("+Inf arrival rate", snapshot(arrival=float("inf")), Reason.NO_METRICS),
    ("negative arrival rate", snapshot(arrival=-5.0), Reason.NO_METRICS),
    ("executors unknown", snapshot(executors=None), Reason.NO_METRICS),
    ("stale metrics", snapshot(observed_at=NOW - 600), Reason.STALE_METRICS),
    (
        "stale beyond what the batch in flight explains",
        _giant_batch(observed_at=NOW - 600, seconds_since_progress=None),
        Reason.STALE_METRICS,
    ),
    (
        "unknown backlog on an over-provisioned job (was ScaleIn 4 -> 1)",
        snapshot(arrival=2_000, executors=4, partitions=4, backlog=None),
        Reason.NO_METRICS,
    ),
    (
        "unknown backlog on an idle job with no cost measured (was ScaleIn 4 -> 1)",
        snapshot(arrival=0.0, executors=4, partitions=4, backlog=None, stages=(),
                 batch_duration_seconds=None),
        Reason.NO_METRICS,
    ),
    (
        "a backlog of unknown age",
        snapshot(arrival=2_000, executors=4, partitions=4, backlog=5e4, age=None),
        Reason.NO_METRICS,
    ),
    ("no batch in the window", snapshot(batches=0), Reason.INSUFFICIENT_DATA),
    (
        "no per-stage series and no batch durations",
        snapshot(stages=(), batch_duration_seconds=None),
        Reason.INSUFFICIENT_DATA,
    ),
]


@pytest.mark.parametrize(("name", "observed", "reason"), HOSTILE, ids=[h[0] for h in HOSTILE])
def test_hostile_metrics_hold(name: str, observed: MetricsSnapshot, reason: Reason) -> None:
    d = decide(observed, ScalingPolicySpec(), ScalingHistory(), NOW)
    assert d.action is Action.HOLD
    assert d.reason is reason
    assert "hold" in d.message or "need" in d.message or "no " in d.message


def test_missing_stage_series_falls_back_to_batch_durations() -> None:
    d = decide(
        snapshot(arrival=20_000, stages=(), batch_duration_seconds=0.95, backlog=1e5, age=10),
        ScalingPolicySpec(),
        ScalingHistory(),
        NOW,
    )
    assert d.action is Action.SCALE and (d.target_executors or 0) > 1


def test_one_action_per_load_change_then_holds() -> None:
    """After the sized scale-out takes effect, the engine holds (DS2's one-step property)."""
    pol = ScalingPolicySpec()
    before = stateless_heavy(arrival=20_000, backlog=50_000, age=10)
    d = decide(before, pol, ScalingHistory(), NOW)
    assert d.action is Action.SCALE
    h = record(ScalingHistory(), d, NOW, rate_before=before.processed_rate)
    later = NOW + 60
    after = stateless_heavy(arrival=12_000, executors=d.target_executors, observed_at=later)
    d2 = decide(after, pol, h, later)
    assert d2.action is Action.HOLD, d2.message


def test_record_keeps_recommendations_actions_and_blocks() -> None:
    pol = ScalingPolicySpec()
    d = decide(stateless_heavy(arrival=20_000, backlog=50_000, age=10), pol, ScalingHistory(), NOW)
    h = record(ScalingHistory(), d, NOW, rate_before=9_000)
    kinds = [e.kind for e in h.entries]
    assert kinds == ["recommendation", "action"]
    assert h.last_action() is not None and h.last_action().executors == 4  # type: ignore[union-attr]
    assert h.entries[1].expected_rate and h.entries[1].expected_rate > 9_000


def test_every_reason_code_is_emitted_by_a_named_case() -> None:
    """No reason code the engine never gives: each is the expected reason of a case above (or
    of test_cooldown.py's)."""
    emitted = {c.expected[1] for c in (*CASES, *COOLDOWN_CASES)} | {h[2] for h in HOSTILE}
    assert set(Reason) - emitted == set()
