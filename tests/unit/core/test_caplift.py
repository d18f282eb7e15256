"""An admission cap that binds is lifted by a restart (controller/core/caplift.py): named
cases, the demo's situation first (batches capped at 97,911 records on three executors,
98,786 records/s delivered against 142,786 arriving)."""

from __future__ import annotations

import pytest

from contracts.history import ScalingHistory
from controller.core import Action, MetricsSnapshot, Reason, decide
from controller.core.caplift import CAP_LIFT_GAIN, CAP_READ_SHARE
from tests.unit.core.factories import CAP, NOW, capped, policy

POLICY = policy(executors={"min": 1, "max": 3})


def test_a_cap_that_binds_restarts_the_job_as_it_is_with_a_larger_cap() -> None:
    d = decide(capped(), POLICY, ScalingHistory(), NOW)
    assert (d.action, d.reason) == (Action.REPARTITION, Reason.ADMISSION_CAP_BOUND), d.message
    assert (d.target_executors, d.target_partitions) == (3, 3)
    # batches of 0.9 s against the span the cap was sized for: at least CAP_LIFT_GAIN x larger
    assert d.max_records_per_batch is not None
    assert d.max_records_per_batch >= CAP_LIFT_GAIN * CAP, d.message
    assert f"batches read all {CAP:,} records" in d.message


@pytest.mark.parametrize(
    ("name", "observed"),
    [
        ("batches that do not fill the cap", capped(rows_per_batch=CAP * CAP_READ_SHARE * 0.9)),
        ("no more waiting than one batch", capped(backlog=CAP * 0.5, age=1)),
        ("batches as long as the cap was sized for", capped(batch_seconds=15.0)),
        ("no cap in force", capped(admission_cap_records=None)),
        ("a job that keeps up (the pile drains)", capped(arrival=20_000)),
    ],
)
def test_no_lift_without_the_whole_evidence(name: str, observed: MetricsSnapshot) -> None:
    d = decide(observed, POLICY, ScalingHistory(), NOW)
    assert d.reason is not Reason.ADMISSION_CAP_BOUND, (name, d.message)


def test_no_lift_when_restarts_are_off_or_too_slow() -> None:
    off = policy(executors={"min": 1, "max": 3}, partitions={"repartition": False})
    slow = policy(executors={"min": 1, "max": 3}, partitions={"maxDowntimeSeconds": 1})
    for pol in (off, slow):
        d = decide(capped(), pol, ScalingHistory(), NOW)
        assert d.reason is not Reason.ADMISSION_CAP_BOUND, d.message


def test_no_lift_on_a_window_that_spans_the_last_restart() -> None:
    """The window must describe the capped query: 20 s after a restart that took 15 s, the
    30 s window still holds batches from before it."""
    from contracts.history import HistoryEntry

    restarted = ScalingHistory(entries=(HistoryEntry(
        time=NOW - 35, kind="action", action="repartition", executors=3, partitions=3,
        reason=Reason.REPARTITION_OUT.value),))  # fmt: skip
    soon = decide(capped(last_restart_seconds=15.0), POLICY, restarted, NOW)
    assert soon.reason is not Reason.ADMISSION_CAP_BOUND, soon.message
    later = decide(capped(last_restart_seconds=15.0), POLICY, restarted, NOW + 20)
    assert later.reason is Reason.ADMISSION_CAP_BOUND, later.message


def test_a_cap_that_binds_on_saturated_executors_restarts_the_job_onto_more_of_them() -> None:
    """Capped batches that overrun their trigger: the executors hold the job back as much as
    the cap. A lift at the same size first, then the scale-out, is a restart more: on a ramp
    from 0.8x to 9.3x over 145 s (``make bench-unseen SEED=10``, #0) four restarts, 2 -> 4 -> 8,
    the lift at 8, then 8 -> 16, where the restart onto more executors, which sizes a new cap
    for them, makes three. Where no more executors may run, the lift stays the move."""
    from controller.core import StageMetrics

    rows = CAP * 30
    heavy = capped(batch_seconds=1.6, processed_rate=CAP / 1.6, stages=(
        StageMetrics(name="source", kind="source", partitions=3, rows=rows,
                     busy_seconds=rows * 1.6e-5),
        StageMetrics(name="counts", kind="stateful", partitions=3, rows=rows,
                     busy_seconds=rows * 3.2e-5, state_bytes=5e7, state_rows=2_000),
    ))  # fmt: skip
    grown = decide(heavy, policy(executors={"min": 1, "max": 12}), ScalingHistory(), NOW)
    assert grown.action is Action.REPARTITION, grown.message
    assert grown.reason is not Reason.ADMISSION_CAP_BOUND, grown.message
    assert (grown.target_executors or 0) > 3 and grown.max_records_per_batch, grown.message
    at_max = decide(heavy, POLICY, ScalingHistory(), NOW)
    assert at_max.reason is Reason.ADMISSION_CAP_BOUND, at_max.message
