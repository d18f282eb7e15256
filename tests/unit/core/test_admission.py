"""The admission cap a restart or recovery sets for the query it starts (controller.core.admission).

The reference job (factories): trigger 1 s, SLO 30 s, so a capped batch lasts
ADMISSION_BATCH_TRIGGERS (2) triggers at executors.max (8 by default): the cap is the records
8 executors process in 2 s at full use, after the restart's layout.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import pytest

from contracts.history import HistoryEntry, ScalingHistory
from controller.core import Action, Reason, decide
from controller.core.admission import (
    ADMISSION_BATCH_TRIGGERS,
    admission_cap,
    described,
    soonest_under_slo,
    sustaining_records,
)
from controller.core.capacity import CapacityModel, Layout
from controller.core.inputs import Inputs
from tests.unit.core.factories import NOW, policy, snapshot, state_heavy, stateless_heavy

SCALED_IN_PLACE = ScalingHistory(
    entries=(
        HistoryEntry(time=NOW - 200, kind="action", action="scale", executors=4,
                     executors_before=2),
    )
)  # fmt: skip
RECOMMENDED = ScalingHistory(
    entries=(
        HistoryEntry(time=NOW - 100, kind="recommendation", executors=2, expected_rate=12_000),
    )
)


def _full_rate_at_max(snap: object, partitions: int, executors_max: int = 8) -> float:
    model = CapacityModel.from_snapshot(snap, 30.0)  # type: ignore[arg-type]
    assert model is not None
    return replace(model, gain_share=1.0).capacity(Layout(executors_max, partitions, True))


def _costs_at_max(snap: Any) -> tuple[CapacityModel, float, float]:
    """The job's model, and a capped batch's fixed seconds and seconds per record at
    executors.max (8) over 4 state partitions, at full use (as the cap is sized)."""
    model = CapacityModel.from_snapshot(snap, 30.0)
    assert model is not None
    full = replace(model, gain_share=1.0)
    reach = Layout(8, 4, restart=True)
    return model, full.fixed_seconds(reach), full.work_seconds_per_record(reach)


def test_a_repartition_caps_the_batches_of_the_query_it_starts() -> None:
    snap = state_heavy(arrival=12_000, executors=4, partitions=4, backlog=50_000, age=12)
    d = decide(snap, policy(), SCALED_IN_PLACE, NOW)
    assert (d.action, d.reason) == (Action.REPARTITION, Reason.REPARTITION_OUT)
    assert d.target_partitions == 4
    # the model's tasks-per-wave rounding aside, 8 executors' full rate over two 1 s triggers
    expected = _full_rate_at_max(snap, 4) * ADMISSION_BATCH_TRIGGERS * 1.0
    assert d.max_records_per_batch == pytest.approx(expected, abs=1)
    assert f"batches capped at {d.max_records_per_batch:,} records" in d.message
    assert "executors.max=8" in d.message


def test_the_cap_follows_executors_max_not_the_restart_size() -> None:
    """A ceiling for any size the job may reach in place after the restart (executors.max at
    the restart's partitions), so it never throttles a later in-place scale-out."""
    snap = snapshot(arrival=20_000, executors=2)  # both stages on 8 partitions
    model = CapacityModel.from_snapshot(snap, 30.0)
    caps = {
        n: admission_cap(Inputs(snap, policy(executors={"max": n}), ScalingHistory(), NOW),
                         model, 8)
        for n in (4, 8)
    }  # fmt: skip
    assert caps[4] and caps[8]
    # 8 slots against 4, one wave each
    assert caps[8].records == pytest.approx(2 * caps[4].records, rel=0.01)


def test_a_long_trigger_caps_at_the_slo_batch_budget() -> None:
    """Two 10 s triggers would outlast the batch the 30 s SLO allows (15 s): the budget binds."""
    base = state_heavy(arrival=12_000, executors=4, partitions=4, backlog=50_000, age=12)
    slow = base.model_copy(update={"trigger_interval_seconds": 10.0})
    d = decide(slow, policy(), SCALED_IN_PLACE, NOW)
    if d.action is not Action.REPARTITION:
        pytest.fail(f"expected a repartition, got {d.summary()}")
    model = CapacityModel.from_snapshot(slow, 30.0)
    assert model is not None
    rate = replace(model, gain_share=1.0).capacity(Layout(8, d.target_partitions, True))
    assert d.max_records_per_batch == pytest.approx(rate * 15.0, abs=1)
    assert "a 15 s batch" in d.message


def test_an_in_place_scale_out_and_a_hold_set_no_cap() -> None:
    """A source reads its rate limit when its query starts: only moves that start one carry it."""
    out = decide(stateless_heavy(arrival=20_000, backlog=50_000, age=10), policy(),
                 ScalingHistory(), NOW)
    assert out.action is Action.SCALE and out.max_records_per_batch is None
    hold = decide(snapshot(arrival=5_000, executors=1), policy(), ScalingHistory(), NOW)
    assert hold.action is Action.HOLD and hold.max_records_per_batch is None
    assert "capped" not in out.message + hold.message


def test_a_recovery_caps_the_new_driver_from_the_last_window() -> None:
    snap = snapshot(arrival=10_000, executors=2, driver_up=False, backlog=300_000, age=30)
    d = decide(snap, policy(), RECOMMENDED, NOW)
    assert d.action is Action.RECOVER
    expected = _full_rate_at_max(snap, 8) * ADMISSION_BATCH_TRIGGERS
    assert d.max_records_per_batch == pytest.approx(expected, abs=1)
    assert "batches capped at" in d.message


def test_a_recovery_without_stage_metrics_caps_from_the_expected_rate() -> None:
    """The Kubernetes host's recovery snapshot comes from status, without stages: the last
    recommendation's expected rate (12,000 records/s on 2 executors at the 70% target) scaled
    to full use at executors.max, over two triggers."""
    snap = snapshot(arrival=10_000, executors=2, driver_up=False, backlog=300_000, age=30,
                    stages=())  # fmt: skip
    d = decide(snap, policy(), RECOMMENDED, NOW)
    assert d.action is Action.RECOVER
    assert d.max_records_per_batch == pytest.approx(12_000 / 2 / 0.7 * 8 * 2.0, abs=1)


def test_a_recovery_that_knows_no_cost_sets_no_cap() -> None:
    snap = snapshot(arrival=5_000, driver_up=False, seconds_since_progress=None, stages=())
    d = decide(snap, policy(), ScalingHistory(), NOW)
    assert d.action is Action.RECOVER
    assert d.max_records_per_batch is None
    assert "capped" not in d.message


def test_an_overload_beyond_executors_max_caps_at_the_slo_batch_budget() -> None:
    """More arrives than 8 executors process at full use: the backlog grows whatever the engine
    does, and each batch's fixed driver time costs throughput, so the batches are as long as the
    30 s SLO allows (15 s), not two triggers."""
    snap = state_heavy(arrival=80_000, executors=4, partitions=4, backlog=50_000, age=12)
    d = decide(snap, policy(), SCALED_IN_PLACE, NOW)
    assert (d.action, d.target_executors) == (Action.REPARTITION, 8), d.summary()
    full = _full_rate_at_max(snap, d.target_partitions or 4)
    assert full < 80_000
    assert d.max_records_per_batch == pytest.approx(full * 15.0, abs=1)
    assert "a 15 s batch at executors.max=8, the longest the SLO allows" in d.message
    assert f"more arrives, 80,000 records/s, than executors.max processes at full use, " \
           f"{full:,.0f}" in d.message


def test_a_load_within_reach_keeps_the_two_trigger_cap() -> None:
    """Half of what executors.max processes at full use: two triggers carry it; just over it:
    the budget (an overload)."""
    base = state_heavy(arrival=12_000, executors=4, partitions=4, backlog=0, age=0)
    model = CapacityModel.from_snapshot(base, 30.0)
    assert model is not None
    reach = _full_rate_at_max(base, 4)
    for arrival, span in ((reach * 0.5, ADMISSION_BATCH_TRIGGERS), (reach * 1.01, 15.0)):
        snap = base.model_copy(update={"arrival_rate": arrival})
        cap = admission_cap(Inputs(snap, policy(), ScalingHistory(), NOW), model, 4)
        assert cap is not None and cap.span_seconds == span
        assert cap.overloaded is (span == 15.0)
        assert cap.sustains is None


def test_sustaining_records_carry_what_is_needed() -> None:
    """N / (F + N w) >= needed at N = needed F / (1 - needed w); none when needed w >= 1."""
    n = sustaining_records(80_000, 0.3, 1e-5)
    assert n == pytest.approx(80_000 * 0.3 / 0.2)
    assert n / (0.3 + n * 1e-5) == pytest.approx(80_000)
    assert sustaining_records(100_000, 0.3, 1e-5) == math.inf
    assert sustaining_records(0, 0.3, 1e-5) == 0.0


def test_a_cap_near_reach_is_raised_to_carry_arrival_and_catch_up() -> None:
    """A two-trigger batch (paying its fixed time every 2 s) carries the arrival but not the
    catch-up of a 50,000-record backlog on top: the cap is raised until a batch does, within
    the budget, and the message says why."""
    base = state_heavy(arrival=12_000, executors=4, partitions=4, backlog=50_000, age=12)
    model, fixed, per = _costs_at_max(base)
    two = _full_rate_at_max(base, 4) * ADMISSION_BATCH_TRIGGERS
    carried_by_two = two / (fixed + two * per)  # what two triggers' worth carries per second
    snap = base.model_copy(update={"arrival_rate": carried_by_two})  # plus 50k to catch up
    x = Inputs(snap, policy(), ScalingHistory(), NOW)
    cap = admission_cap(x, model, 4)
    assert cap is not None and cap.sustains is not None and not cap.overloaded
    carried = cap.records / (fixed + cap.records * per)
    assert carried >= cap.sustains * 0.999
    assert ADMISSION_BATCH_TRIGGERS < cap.span_seconds <= 15.0
    assert "a shorter one would carry less than the" in described(cap, x)


def test_a_cap_out_of_the_catch_ups_reach_commits_within_the_slo() -> None:
    """97% of what executors.max reaches arrives and a large pile waits: no batch the SLO allows
    carries the catch-up. The whole budget (15 s) would hold the oldest record, ~22 s old when
    the query is back, until 37 s: past the 30 s SLO. The cap takes the longest whole-trigger
    batch whose first commit (plus the trigger after it) stays within the SLO, and it still
    carries more than the arrival; without the restart's downtime it is the budget, as before."""
    base = state_heavy(arrival=12_000, executors=4, partitions=4, backlog=2_000_000, age=10)
    model, fixed, per = _costs_at_max(base)
    snap = base.model_copy(update={"arrival_rate": 0.97 * _full_rate_at_max(base, 4)})
    x = Inputs(snap, policy(), ScalingHistory(), NOW)

    blind = admission_cap(x, model, 4)
    assert blind is not None and blind.span_seconds == pytest.approx(15.0)
    assert blind.lag_at_start is None

    cap = admission_cap(x, model, 4, downtime=12.0)
    assert cap is not None and cap.lag_at_start == pytest.approx(22.0)
    assert not cap.overloaded and cap.sustains is not None
    first_commit = 22.0 + cap.span_seconds + 1.0  # the oldest record's, the next trigger's wait
    assert first_commit <= 30.0 + 1e-6, cap
    assert cap.span_seconds == pytest.approx(7.0, abs=0.01)  # the longest such whole trigger
    carried = cap.records / (fixed + cap.records * per)
    assert carried > snap.arrival_rate, (carried, snap.arrival_rate)
    assert "brings the lag under the SLO soonest" in described(cap, x)


def test_soonest_under_slo_trades_the_first_peak_against_the_drain() -> None:
    """Where every span's first commit is past the SLO, neither the shortest batch that carries
    the arrival (a drain too slow) nor the budget (the highest first peak) wins; and no span
    carrying more than the arrival means no choice (the budget keeps the throughput)."""
    snap = snapshot(arrival=100_000)
    x = Inputs(snap, policy(), ScalingHistory(), NOW)
    fixed, per = 0.3, 8.75e-6  # 114,286 records/s at full use, 0.3 s per batch whatever it reads
    late = soonest_under_slo(x, fixed, per, lag_at_start=28.0)
    assert late is not None and 2.0 < late < 15.0, late
    assert soonest_under_slo(x, fixed, per, lag_at_start=10.0) == 15.0  # all the budget: in time
    assert soonest_under_slo(x, fixed, 1e-5, lag_at_start=10.0) is None  # 100,000/s at most


def test_a_recovery_from_the_expected_rate_under_overload_caps_at_the_budget() -> None:
    """No stage metrics, and more arrives (100,000/s) than the expected rate reaches at
    executors.max (12,000 / 2 / 0.7 x 8 = 68,571/s): batches of the SLO's 15 s budget."""
    snap = snapshot(arrival=100_000, executors=2, driver_up=False, backlog=300_000, age=30,
                    stages=())  # fmt: skip
    d = decide(snap, policy(), RECOMMENDED, NOW)
    assert d.action is Action.RECOVER
    assert d.max_records_per_batch == pytest.approx(12_000 / 2 / 0.7 * 8 * 15.0, abs=1)
    assert "the longest the SLO allows" in d.message


def test_an_unknown_arrival_is_no_overload() -> None:
    base = state_heavy(arrival=12_000, executors=4, partitions=4, backlog=50_000, age=12)
    model = CapacityModel.from_snapshot(base, 30.0)
    snap = base.model_copy(update={"arrival_rate": None})
    cap = admission_cap(Inputs(snap, policy(), ScalingHistory(), NOW), model, 4)
    assert cap is not None and not cap.overloaded
    assert cap.span_seconds == ADMISSION_BATCH_TRIGGERS
