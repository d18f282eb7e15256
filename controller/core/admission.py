"""The admission cap: how many records one micro-batch may read once a query restarts.

A query restarted from its checkpoint (a repartition, a recovery) finds everything that piled up
while it was down, and Structured Streaming reads all of it in its first batch unless the source
caps it (the burst source's ``maxRecordsPerBatch``, Kafka's ``maxOffsetsPerTrigger``): a batch
that runs for minutes, commits nothing meanwhile, and keeps every record it holds waiting until
its end (a job whose batches take ``B`` seconds lags up to about ``2B``,
:data:`~controller.core.capacity.LAG_PER_BATCH`). Capped, the pile drains in batches as long as
the lag SLO allows: the oldest records commit first, metrics keep flowing, and a sustained
overload shows as a backlog instead of one ever longer batch.

The cap is what a batch of :data:`ADMISSION_BATCH_TRIGGERS` trigger intervals (never longer than
the SLO's batch budget, :func:`~controller.core.capacity.batch_budget_seconds`; the whole budget
when more arrives than ``executors.max`` can process, :func:`overloaded`) processes at the
most capacity the job can reach without another restart: ``executors.max`` over the restart's
state partitions, at full use, without the observed-gain correction
(:attr:`~controller.core.capacity.CapacityModel.gain_share`). On fewer executors a capped batch
simply lasts longer; the cap only splits what would be one giant batch.

A cap never holds the job below its arrival: every batch pays its fixed seconds ``F`` (the
driver's overhead, one fixed task cost per wave) whatever it reads, so a batch of ``N`` records
at ``w`` seconds per record carries ``N / (F + N w)`` records/s, less than the full-use rate the
span was sized from. Where two triggers' worth would carry less than the arrival plus the
catch-up rate (the backlog over ``lag.catchUpSeconds``), the cap is raised to the records that
carry it, ``needed F / (1 - needed w)`` (:func:`sustaining_records`), never past what a batch of
the SLO's budget reads. A 10x step held 30 minutes on 16 executors otherwise reads exactly the
cap each batch at 99% of the arrival, and the lag never comes back
(``test_unseen_loads.py::test_a_ten_fold_step_is_never_held_below_its_arrival``).

Where no batch the SLO allows carries the catch-up (a step beyond what the source's partitions
read fast enough to drain in ``lag.catchUpSeconds``), the whole budget is not the answer either:
the first batch after the restart holds the oldest record, already ``age + downtime`` old when
the query is back, until it commits, and a 15 s batch then puts the lag past the SLO however
fast the job drains afterwards. Each later batch's oldest record is younger by what the batch's
surplus over the arrival drained, so the peaks fall at that surplus. The span is then the one
of whole triggers (from :data:`ADMISSION_BATCH_TRIGGERS` to the budget) whose batches bring the
lag under the SLO soonest (:func:`soonest_under_slo`): the longest whose first commit comes
within the SLO, else the one trading the first peak against the drain best. A 10x step held 30
minutes, source-bound at 114k records/s against 100k arriving, then stays within its SLO after
its restart (``test_admission.py::test_a_cap_out_of_the_catch_ups_reach_commits_within_the_slo``,
``make bench``'s step-10x-held).

A source reads its rate limit when its query starts, so the cap travels with the actions that
start one: a repartition (the runner's ``POST /repartition``) and a recovery (the new driver's
``--max-records-per-batch``). The runner keeps the lower of it and the job's own cap. No new
threshold beyond :data:`ADMISSION_BATCH_TRIGGERS` (an overload compares two rates, no margin).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import NamedTuple

from controller.core.capacity import CapacityModel, Layout, batch_budget_seconds
from controller.core.inputs import Inputs

ADMISSION_BATCH_TRIGGERS = 2.0
"""A capped batch lasts about this many trigger intervals at ``executors.max`` (unless that
carries less than the arrival plus the catch-up, :func:`sustaining_records`). Chosen with
``make bench`` (docs/benchmark.md has the figures for 1, 2, 3 and uncapped): at 1 (the usual
maxOffsetsPerTrigger rule: one trigger's worth) the driver's fixed time per batch takes more of
each batch and a sustained overload loses throughput; at 3 the first batch after a restart
holds more. Beyond ``executors.max`` two triggers cost throughput, hence the whole budget there
(:func:`overloaded`)."""


def _span(x: Inputs, reach_rate: float) -> float:
    """Seconds a capped batch lasts at ``executors.max`` (processing ``reach_rate`` records/s):
    :data:`ADMISSION_BATCH_TRIGGERS` triggers, or the SLO's whole batch budget when more
    arrives than ``executors.max`` can process (:func:`overloaded`)."""
    trigger = x.snapshot.trigger_interval_seconds or 0.0
    budget = batch_budget_seconds(trigger, x.policy.lag.slo_seconds)
    if trigger <= 0 or overloaded(x, reach_rate):
        return budget
    return min(ADMISSION_BATCH_TRIGGERS * trigger, budget)


def overloaded(x: Inputs, reach_rate: float) -> bool:
    """More arrives than the most capacity the job can reach (``reach_rate``): the backlog
    grows whatever the engine does, the lag will pass the SLO anyway, and what is left to
    protect is throughput. The driver's fixed time per batch is paid once per batch, so the
    batches are as long as the SLO allows (its batch budget), not two triggers. An unknown
    arrival is not an overload."""
    arrival = x.snapshot.arrival_rate
    return arrival is not None and math.isfinite(reach_rate) and arrival > reach_rate


class Admission(NamedTuple):
    """A cap for the query a restart starts: ``records`` per batch, sized for batches of
    ``span_seconds`` at ``executors.max`` (``reach_rate`` records/s at full use);
    ``overloaded`` when more arrives than that (:func:`overloaded`); ``sustains``: the records/s
    the cap was raised to carry (arrival plus catch-up, :func:`sustaining_records`), else None."""

    records: int
    span_seconds: float
    reach_rate: float
    overloaded: bool
    sustains: float | None = None
    lag_at_start: float | None = None
    """Set when no batch the SLO allows carries ``sustains``: the lag the restart leaves, which
    the span was chosen for (:func:`soonest_under_slo`)."""


def needed_rate(x: Inputs) -> float | None:
    """Records/s a capped batch must carry: the arrival plus the backlog drained within
    ``lag.catchUpSeconds``; None with the arrival unknown."""
    s = x.snapshot
    if s.arrival_rate is None:
        return None
    return s.arrival_rate + (s.backlog_records or 0.0) / x.policy.lag.catch_up_seconds


def sustaining_records(needed: float, fixed_seconds: float, seconds_per_record: float) -> float:
    """Records a batch must read to carry ``needed`` records/s when it pays ``fixed_seconds``
    whatever it reads and ``seconds_per_record`` for each: ``N / (F + N w) >= needed`` gives
    ``N >= needed F / (1 - needed w)``; infinite when no batch is long enough (``needed w >=
    1``). ``test_admission.py::test_sustaining_records_carry_what_is_needed``."""
    if needed <= 0:
        return 0.0
    room = 1.0 - needed * seconds_per_record
    if room <= 0 or not math.isfinite(room):
        return math.inf
    return needed * max(fixed_seconds, 0.0) / room


def soonest_under_slo(
    x: Inputs, fixed: float, per_record: float, lag_at_start: float
) -> float | None:
    """The span (s) of the capped batches that brings the lag under the SLO soonest after a
    restart that leaves the oldest record ``lag_at_start`` old, or None when no span of whole
    triggers carries more than the arrival (the budget then keeps the throughput).

    A batch of ``d`` seconds reads ``(d - fixed) / per_record`` records; its surplus share over
    the arrival ``a`` is ``s(d) = records / (d a) - 1``. The first commit comes at
    ``lag_at_start + d`` plus one trigger (the wait for the batch after it), and every batch
    after it lowers the peak by ``d s(d)``, i.e. the peaks fall at ``s(d)`` per second: the lag
    is over the SLO for about ``max(0, lag_at_start + d + trigger - SLO) / s(d)`` seconds. The
    span with the least of that wins; among spans with none, the longest (the fastest drain)."""
    s, slo = x.snapshot, x.policy.lag.slo_seconds
    trigger, arrival = s.trigger_interval_seconds or 0.0, s.arrival_rate
    if trigger <= 0 or not arrival or per_record <= 0:
        return None
    budget = batch_budget_seconds(trigger, slo)
    spans = [
        k * trigger for k in range(math.ceil(ADMISSION_BATCH_TRIGGERS), int(budget / trigger) + 1)
    ]
    best: tuple[float, float] | None = None  # (seconds over the SLO, -span)
    for d in spans or [budget]:
        surplus = (d - fixed) / per_record / (d * arrival) - 1.0
        if surplus <= 0:
            continue
        over = max(0.0, lag_at_start + d + trigger - slo) / surplus
        if best is None or (over, -d) < best:
            best = (over, -d)
    return -best[1] if best is not None else None


def _admission(
    x: Inputs,
    reach_rate: float,
    fixed: float = 0.0,
    per_record: float = 0.0,
    lag_at_start: float | None = None,
) -> Admission | None:
    """The cap at ``reach_rate`` records/s, or None when the rate is unusable (0, inf, NaN).
    With the batch's ``fixed`` seconds and ``per_record`` seconds known (a capacity model),
    raised to carry the arrival plus the catch-up (:func:`sustaining_records`), never past the
    records a batch of the SLO's budget reads at ``executors.max``; where even that cannot carry
    the catch-up and the lag the restart leaves is known (``lag_at_start``), the span that
    brings the lag under the SLO soonest (:func:`soonest_under_slo`)."""
    span = _span(x, reach_rate)
    records = reach_rate * span
    if not math.isfinite(records) or records < 1:
        return None
    over = overloaded(x, reach_rate)
    need = needed_rate(x)
    if over or need is None or per_record <= 0 or not math.isfinite(per_record):
        return Admission(math.ceil(records), span, reach_rate, over)
    trigger = x.snapshot.trigger_interval_seconds or 0.0
    budget = batch_budget_seconds(trigger, x.policy.lag.slo_seconds)
    most = max((budget - fixed) / per_record, records)
    sustaining = sustaining_records(need, fixed, per_record)
    floor = min(sustaining, most)
    if floor <= records:
        return Admission(math.ceil(records), span, reach_rate, over)
    shaped = None
    if sustaining > most and lag_at_start is not None:
        soonest = soonest_under_slo(x, fixed, per_record, lag_at_start)
        if soonest is not None:
            floor, shaped = max((soonest - fixed) / per_record, records), lag_at_start
    seconds = min(fixed + floor * per_record, budget)
    return Admission(math.ceil(floor), seconds, reach_rate, over, need, shaped)


def admission_cap(
    x: Inputs,
    model: CapacityModel | None,
    partitions: int | None,
    downtime: float | None = None,
) -> Admission | None:
    """Records per batch for the query a restart starts at ``partitions`` state partitions;
    None when the job's cost is unknown (the source's own cap, if any, stays). With the
    restart's ``downtime`` known, the lag it leaves (the backlog's age plus it) shapes a cap
    the catch-up cannot reach (:func:`soonest_under_slo`)."""
    if model is None:
        return None
    reach = Layout(x.policy.executors.max, partitions or model.current_partitions, restart=True)
    full = replace(model, gain_share=1.0)
    age = x.snapshot.backlog_age_seconds
    lag_at_start = age + downtime if age is not None and downtime is not None else None
    return _admission(
        x,
        full.capacity(reach),
        full.fixed_seconds(reach),
        full.work_seconds_per_record(reach),
        lag_at_start,
    )


def admission_cap_from_rate(x: Inputs, per_executor: float) -> Admission | None:
    """The cap when no capacity model can be had (a recovery sized from the history: the
    driver is gone, and with it the window's stage metrics): ``per_executor`` records/s at the
    target utilization, as the last action expected, scaled to full use at ``executors.max``."""
    pol = x.policy
    if per_executor <= 0 or not x.snapshot.trigger_interval_seconds:
        return None
    return _admission(x, per_executor / pol.utilization.target * pol.executors.max)


def described(cap: Admission | None, x: Inputs) -> str:
    """The clause a decision's message carries about the cap ('' without one)."""
    if cap is None:
        return ""
    at_max = f"a {cap.span_seconds:.3g} s batch at executors.max={x.policy.executors.max}"
    if cap.sustains is not None and cap.lag_at_start is not None and not cap.overloaded:
        return (
            f"; batches capped at {cap.records:,} records after the restart ({at_max}: no batch "
            f"the SLO allows carries the {cap.sustains:,.0f} records/s of arrival plus catch-up, "
            f"and with the oldest record ~{cap.lag_at_start:.0f} s old when the query is back "
            "this length brings the lag under the SLO soonest)"
        )
    if cap.sustains is not None and not cap.overloaded:
        return (
            f"; batches capped at {cap.records:,} records after the restart ({at_max}: a "
            f"batch pays its fixed time whatever it reads, and a shorter one would carry less "
            f"than the {cap.sustains:,.0f} records/s of arrival plus catch-up)"
        )
    if not cap.overloaded:
        return (
            f"; batches capped at {cap.records:,} records after the restart ({at_max}), so "
            "what piled up drains in batches the SLO allows"
        )
    return (
        f"; batches capped at {cap.records:,} records after the restart ({at_max}, the longest "
        f"the SLO allows: more arrives, {x.snapshot.arrival_rate or 0:,.0f} records/s, than "
        f"executors.max processes at full use, {cap.reach_rate:,.0f}, so each batch's fixed "
        "time is paid as rarely as the SLO allows)"
    )
