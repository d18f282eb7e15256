"""The fixed cost per task ("a per-task fixed cost fitted from windows at
different rates"). A task pays a fixed part (launch, shuffle fetch, the state store's commit,
the output file's) whatever it reads; busy time per record taken at one load folds it into the
per-record cost, so a light load looks busy.

The case is the capped demo's on real Spark (docs/spark-facts.md): four executors at a quarter
core each, four state partitions, 20,770 records/s arriving after a burst — read as 178% busy
and scaled out to six, while each stateful task spent most of its second committing RocksDB."""

from __future__ import annotations

import pytest

from contracts.history import CostSample, HistoryLimits, ScalingHistory
from contracts.policy import ScalingPolicySpec
from controller.core import MetricsSnapshot, Reason, StageMetrics, decide
from controller.core.capacity import MAX_FIXED_SHARE, CapacityModel, Layout
from controller.core.taskcost import fixed_task_seconds, samples
from tests.unit.core.factories import NOW, snapshot

POLICY = ScalingPolicySpec.model_validate({"executors": {"max": 6}})
STATE_FIXED, STATE_PER_RECORD = 1.2, 2e-5
READ_FIXED, READ_PER_RECORD = 0.3, 4e-6
TASKS = 4


def task_seconds(fixed: float, per_record: float, per_task: float) -> float:
    return fixed + per_record * per_task


def light_load(rate: float = 20_770.0, batches: int = 30) -> MetricsSnapshot:
    """Four executors, four source and four state partitions, a 1 s trigger, keeping up."""
    per_batch = rate
    per_task = per_batch / TASKS
    state = task_seconds(STATE_FIXED, STATE_PER_RECORD, per_task)
    read = task_seconds(READ_FIXED, READ_PER_RECORD, per_task)
    rows = per_batch * batches
    stages = (
        StageMetrics(name="source", kind="source", partitions=TASKS, rows=rows,
                     busy_seconds=read * TASKS * batches),
        StageMetrics(name="counts", kind="stateful", partitions=TASKS, rows=rows,
                     busy_seconds=state * TASKS * batches, state_rows=10_000, state_bytes=5e7),
    )  # fmt: skip
    return snapshot(arrival=rate, executors=4, partitions=TASKS, backlog=30_000, age=1.5,
                    processed_rate=rate, source_partitions=TASKS, stages=stages, batches=batches,
                    batch_duration_seconds=0.1 + read + state)  # fmt: skip


def burst_history() -> ScalingHistory:
    """The same job's windows during the burst: 20,000 and 50,000 records per task."""
    costs: list[CostSample] = []
    for i, per_task in enumerate((20_000.0, 50_000.0)):
        for stage, fixed, per in (("source", READ_FIXED, READ_PER_RECORD),
                                  ("counts", STATE_FIXED, STATE_PER_RECORD)):
            tasks = TASKS * 10.0
            costs.append(CostSample(time=NOW - 120 + i * 30, stage=stage, tasks=tasks,
                                    records=per_task * tasks,
                                    busy_seconds=task_seconds(fixed, per, per_task) * tasks))
    return ScalingHistory(costs=tuple(costs))


def test_windows_at_different_loads_separate_the_fixed_cost_from_the_cost_per_record() -> None:
    fitted = fixed_task_seconds((*burst_history().costs, *samples(light_load(), NOW)))
    assert fitted == pytest.approx({"source": READ_FIXED, "counts": STATE_FIXED})


@pytest.mark.parametrize(
    ("case", "per_task"),
    [
        ("two windows fit any noise exactly", (5_000.0, 50_000.0)),
        ("loads closer than MIN_SPREAD cannot tell the two apart", (20_000.0, 25_000.0, 30_000.0)),
    ],
)
def test_no_fixed_cost_without_enough_evidence(case: str, per_task: tuple[float, ...]) -> None:
    costs = [CostSample(time=NOW, stage="counts", tasks=4.0, records=x * 4,
                        busy_seconds=task_seconds(STATE_FIXED, STATE_PER_RECORD, x) * 4)
             for x in per_task]  # fmt: skip
    assert fixed_task_seconds(costs) == {}, case


def test_a_cost_per_record_only_fits_no_fixed_cost_and_a_flat_one_keeps_a_cost_per_record(
) -> None:
    proportional = [CostSample(time=NOW, stage="s", tasks=1.0, records=x, busy_seconds=x * 1e-5)
                    for x in (1_000.0, 10_000.0, 100_000.0)]  # fmt: skip
    assert fixed_task_seconds(proportional) == {}
    flat = [CostSample(time=NOW, stage="s", tasks=1.0, records=x, busy_seconds=y)
            for x, y in ((1_000.0, 1.0), (10_000.0, 0.9), (100_000.0, 1.1))]  # fmt: skip
    assert fixed_task_seconds(flat) == {"s": pytest.approx(MAX_FIXED_SHARE * 0.9)}


def test_a_window_gives_one_sample_per_stage_with_its_tasks_per_batch_and_one_of_batches(
) -> None:
    got = samples(light_load(batches=30), NOW)
    assert [(c.stage, c.tasks, c.records) for c in got] == [
        ("@batch:4x4", 30.0, pytest.approx(20_770.0 * 30)),
        ("source", 120.0, pytest.approx(20_770.0 * 30)),
        ("counts", 120.0, pytest.approx(20_770.0 * 30)),
    ]
    assert samples(light_load().model_copy(update={"batches": 0}), NOW) == ()
    no_tasks = light_load()
    no_tasks = no_tasks.model_copy(update={"stages": tuple(
        st.model_copy(update={"partitions": None}) for st in no_tasks.stages)})
    assert [c.stage for c in samples(no_tasks, NOW)] == ["@batch:4x0"]


def test_the_fixed_cost_is_paid_per_task_wave_so_longer_batches_amortize_it() -> None:
    fitted = {"source": READ_FIXED, "counts": STATE_FIXED}
    plain = CapacityModel.from_snapshot(light_load(), 30.0)
    model = CapacityModel.from_snapshot(light_load(), 30.0, fitted)
    assert plain is not None and model is not None
    now, one = Layout(4, 4, restart=False), Layout(1, 4, restart=True)
    assert model.fixed_seconds(now) == pytest.approx(0.1 + READ_FIXED + STATE_FIXED)
    assert model.fixed_seconds(one) == pytest.approx(0.1 + 4 * (READ_FIXED + STATE_FIXED))
    # the light load is what it is: a small share of a 15 s batch budget, not over 100%
    assert plain.utilization(20_770.0, now) > 1.0
    assert model.utilization(20_770.0, now) < POLICY.utilization.low
    # one executor runs the four tasks of each stage in four waves: four fixed costs a batch
    assert model.utilization(20_770.0, one) > model.utilization(20_770.0, Layout(4, 4, True))


def test_the_capped_demos_light_load_is_not_scaled_out_once_the_fixed_cost_is_known() -> None:
    """On real Spark: RepartitionStateBound 4 -> 6 at 20,770 records/s ("busy 178% now")."""
    plain = decide(light_load(), POLICY, ScalingHistory(), NOW)
    fitted = decide(light_load(), POLICY, burst_history(), NOW)
    assert (plain.reason, plain.target_executors) == (Reason.REPARTITION_OUT, 6), plain.message
    assert "busy 164% now" in plain.message
    assert fitted.reason is Reason.SCALE_DOWN_DEFERRED, fitted.message
    assert "busy 14% (< 40%) at 20,770 records/s; fewer executors (1) recommended" \
        in fitted.message


def test_the_history_keeps_one_sample_per_band_and_bounds_them() -> None:
    def sample(t: float, per_task: float, stage: str = "counts") -> CostSample:
        return CostSample(time=t, stage=stage, tasks=4.0, records=per_task * 4, busy_seconds=1.0)

    h = ScalingHistory().add_costs((sample(NOW - 20, 10_000.0),), NOW)
    h = h.add_costs((sample(NOW - 10, 11_000.0), sample(NOW - 10, 11_000.0, "source")), NOW)
    assert [(c.stage, c.time) for c in h.costs] == [("counts", NOW - 10), ("source", NOW - 10)]
    h = h.add_costs((sample(NOW, 40_000.0),), NOW)
    assert len(h.costs) == 3
    limits = HistoryLimits(max_cost_samples=2, max_age_seconds=100.0)
    assert [c.records / c.tasks for c in h.trimmed(NOW, limits).costs] == [11_000.0, 40_000.0]
    assert h.trimmed(NOW + 95, limits).costs == (sample(NOW, 40_000.0),)


BATCH_FIXED, BATCH_PER_RECORD = 2.5, 6.5e-6
"""One quarter-core executor: the wall time of a batch, most of it fixed (waves of four source
tasks and a stateful task, with the gaps between them that no task's busy time shows)."""


def one_executor(rate: float = 20_770.0) -> MetricsSnapshot:
    """The capped demo at t=220 s on real Spark: 1 executor, 1 state partition, 4 source
    partitions, keeping up with 20,770 records/s in batches of ~2.9 s (lag 1.5-2 s)."""
    batch = BATCH_FIXED / (1 - rate * BATCH_PER_RECORD)
    batches = round(30 / batch)
    per_batch = rate * batch
    rows = per_batch * batches
    stages = (
        StageMetrics(name="source", kind="source", partitions=4, rows=rows,
                     busy_seconds=(4 * 0.1 + per_batch * 1e-6) * batches),
        StageMetrics(name="counts", kind="stateful", partitions=1, rows=rows,
                     busy_seconds=(0.3 + per_batch * 2e-6) * batches, state_rows=10_000,
                     state_bytes=5e7),
    )  # fmt: skip
    return snapshot(arrival=rate, executors=1, partitions=1, backlog=35_000, age=1.7,
                    processed_rate=rate, source_partitions=4, stages=stages, batches=batches,
                    batch_duration_seconds=batch)  # fmt: skip


def batch_history() -> ScalingHistory:
    """Batches of the same layout at 0.4 load and during the burst."""
    return ScalingHistory(costs=tuple(
        CostSample(time=NOW - 200 + i, stage="@batch:1x1", tasks=10.0, records=per_batch * 10,
                   busy_seconds=(BATCH_FIXED + BATCH_PER_RECORD * per_batch) * 10)
        for i, per_batch in enumerate((150_000.0, 500_000.0))))


def test_a_batchs_fixed_wall_time_is_not_read_as_a_cost_per_record() -> None:
    """On real Spark: RepartitionStateBound 1 -> 2 at 20,770 records/s, "batches of 2.89 s
    (trigger 1 s) take 2.98x the tasks' busy time per record: capacity from wall time"."""
    plain = decide(one_executor(), POLICY, ScalingHistory(), NOW)
    fitted = decide(one_executor(), POLICY, batch_history(), NOW)
    assert plain.reason is Reason.WITHIN_LAG_BUDGET and "asks for 2" in plain.message
    assert "busy 97%" in plain.message or "busy 97%" in plain.diagnosis.evidence[0]
    assert "capacity from wall time" in " ".join(plain.diagnosis.evidence)
    # the same batches, their fixed wall time known (2.5 s of each): over a third of the budget
    assert fitted.reason is Reason.AT_MIN, fitted.message
    assert fitted.diagnosis.evidence[0] == "busy 37% of the batch budget at 20,770 records/s"
    assert not any("capacity from wall time" in e for e in fitted.diagnosis.evidence)


def test_without_the_batches_fit_their_wall_time_inflates_fixed_and_per_record_costs_alike(
) -> None:
    """On real Spark, right after the burst: the tasks' fixed costs known, the batches' not yet
    ("batches of 2.70 s take 16.79x the tasks' busy time per record"): the gap between wall and
    busy time was put on the few records' cost alone, and 1 executor was repartitioned to 4."""
    snap = one_executor()
    fitted = {"source": 0.1, "counts": 0.3}
    model = CapacityModel.from_snapshot(snap, 30.0, fitted)
    assert model is not None
    now = Layout(1, 1, restart=False)
    per_batch = 20_770.0 * (snap.batch_duration_seconds or 0)
    work = (snap.batch_duration_seconds or 0) - 0.1
    variable = (1e-6 + 2e-6) * per_batch
    assert model.wall_ratio == pytest.approx(work / (4 * 0.1 + 0.3 + variable))
    assert model.fixed_seconds(now) == pytest.approx(0.1 + model.wall_ratio * (4 * 0.1 + 0.3))
    assert model.utilization(20_770.0, now) < POLICY.utilization.high
