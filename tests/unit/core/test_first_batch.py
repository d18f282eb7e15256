"""A job started into a burst: nothing has committed yet, and the first batch in flight is the
only evidence (:func:`controller.core.inflight.behind`). Past its trigger, its records over its
age bound the rate it runs at from above; under the measured arrival, the job cannot keep up
and is sized on that bound at once, in one action. Otherwise it waits for the batch."""

from __future__ import annotations

from typing import Any

import pytest

from controller.core import Action, MetricsSnapshot, Reason, decide
from tests.unit.core.factories import NOW, Case, check, snapshot


def _first_batch(**kw: Any) -> MetricsSnapshot:
    """One executor, no batch committed yet: no stages, batch durations or processed rate; the
    first batch 8 s in flight over 60,000 records unless ``kw`` says otherwise."""
    fields: dict[str, Any] = {
        "executors": 1,
        "batches": 0,
        "stages": (),
        "processed_rate": None,
        "batch_duration_seconds": None,
        "overhead_seconds": None,
        "seconds_since_progress": None,
        "batch_in_flight_seconds": 8,
        "batch_in_flight_rows": 60_000,
    }
    fields.update(kw)
    return snapshot(**fields)


CASES = [
    Case(
        "a job started into a burst: its first batch 8 s in flight (past its 1 s trigger, inside "
        "the SLO's budget) over 60,000 records while 40,000/s arrive -> scale out before it "
        "commits, never InsufficientData",
        _first_batch(arrival=40_000, backlog=300_000, age=12),
        (Action.SCALE, Reason.SCALE_OUT, 8, None),
        message_has="scale out 1 -> 8",  # one action to the needed size: the overload is evident
    ),
    Case(
        "the first batch in flight keeps pace with the arrival (its records over its age above "
        "it): wait for it",
        _first_batch(arrival=5_000, backlog=60_000, age=10),
        (Action.HOLD, Reason.INSUFFICIENT_DATA, None, None),
    ),
    Case(
        "a first batch no older than its trigger: wait for it",
        _first_batch(arrival=40_000, backlog=60_000, age=2, batch_in_flight_seconds=1,
                     batch_in_flight_rows=30_000),
        (Action.HOLD, Reason.INSUFFICIENT_DATA, None, None),
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_decide(case: Case) -> None:
    check(case)


def test_a_first_batch_behind_the_arrival_is_named_in_the_diagnosis() -> None:
    """The evidence says what bounds it: the running batch's records over its age against the
    arrival."""
    case = CASES[0]
    d = decide(case.observed, case.policy, case.history, NOW)
    assert any(
        "at most 7,500 records/s against 40,000 arriving, under-provisioned before it commits" in e
        for e in d.diagnosis.evidence
    ), d.diagnosis.evidence
