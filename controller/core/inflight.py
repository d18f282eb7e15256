"""The micro-batch in flight: a long batch is a slow job, not stale metrics and not a failure.

Structured Streaming reports a batch only when it commits (``onQueryProgress``). A job without an
admission cap that falls behind runs giant batches: for minutes nothing commits, the newest
completed batch grows old, and the window may hold no batch at all. Read naively, that is stale
metrics and then "no batch committed while data waits", a failure; recovering restarts the job
and throws the running batch's work away. The runner also reports the batch running now
(:attr:`~controller.core.snapshot.MetricsSnapshot.batch_in_flight_seconds`, its age, and
``batch_in_flight_rows``, the records it reads), and the engine uses it three ways:

- freshness (:func:`unexplained_age`): the newest completed batch may be as old as the running
  batch; only the time before that batch started counts against ``timing.staleAfterSeconds``;
- failure (:func:`unexplained_stall`, used by
  :func:`~controller.core.diagnosis.failure_evidence`): likewise against
  ``diagnosis.noProgressSeconds``: a driver that is running a batch is alive and working;
- evidence of under-provisioning (:func:`with_batch_in_flight`): a batch running longer than the
  longest batch the lag SLO allows (:func:`overdue`, the budget of
  :func:`~controller.core.capacity.batch_budget_seconds`) lets the backlog age grow. Its age is a
  lower bound of its duration, so its wall time per record is a lower bound of the job's cost
  (:func:`~controller.core.capacity.wall_fit` reads it), and a window with no completed batch is
  sized on the running batch alone instead of holding with InsufficientData. So is a window with
  no completed batch whose running batch, past its trigger, already reads slower than records
  arrive (:func:`behind`: a job started into a burst, its first batch on one executor): its
  records over its age bound the rate it can reach from above, so the job cannot keep up at this
  layout whatever the rest of the batch does, and holding would only let the pile grow.

No new threshold: the SLO's batch budget, the trigger, the measured arrival and the policy's
existing timeouts decide.
"""

from __future__ import annotations

from contracts.policy import ScalingPolicySpec
from controller.core.capacity import batch_budget_seconds
from controller.core.snapshot import MetricsSnapshot, StageMetrics

IN_FLIGHT_STAGE = "batch-in-flight"
"""Name of the stand-in read stage that carries the running batch's records when the window has
no completed batch: the capacity model then costs the whole batch as one stage from its wall time
(``capacity._fallback_stage``), capped by the source's partitions as without stage metrics (the
one parallelism cap that is known; it may read as SourcePartitionBound until a batch commits)."""


def in_flight(s: MetricsSnapshot) -> float | None:
    """Age of the batch running now (s), None when none runs or it is unknown."""
    return s.batch_in_flight_seconds


def unexplained_age(s: MetricsSnapshot, age: float) -> float:
    """``age`` (since the newest completed batch) less the time the running batch explains."""
    return max(0.0, age - (s.batch_in_flight_seconds or 0.0))


def unexplained_stall(s: MetricsSnapshot) -> float | None:
    """Seconds without a committed batch that no running batch explains (None: unknown)."""
    if s.seconds_since_progress is None:
        return None
    return unexplained_age(s, s.seconds_since_progress)


def budget(s: MetricsSnapshot, policy: ScalingPolicySpec) -> float:
    """The longest batch the lag SLO allows (s)."""
    return batch_budget_seconds(s.trigger_interval_seconds or 0.0, policy.lag.slo_seconds)


def overdue(s: MetricsSnapshot, policy: ScalingPolicySpec) -> bool:
    """The running batch has outlasted the longest batch the lag SLO allows."""
    age = s.batch_in_flight_seconds
    return age is not None and age > budget(s, policy)


def behind(s: MetricsSnapshot) -> bool:
    """No batch completed in the window, and the running batch, older than its trigger, reads
    slower than records arrive: its records (at most the backlog when unreported, which only
    raises the bound) over its age are an upper bound of the rate it processes at, and that is
    under the measured arrival. Unknown arrival, age or records are never read as behind."""
    age, rows, arrival = s.batch_in_flight_seconds, rows_bound(s), s.arrival_rate
    stood_in = any(st.name == IN_FLIGHT_STAGE for st in s.stages)  # with_batch_in_flight's
    if (s.batches and not stood_in) or age is None or rows is None or rows <= 0 or not arrival:
        return False
    return age > (s.trigger_interval_seconds or 0.0) and rows / age < arrival


def telling(s: MetricsSnapshot, policy: ScalingPolicySpec) -> bool:
    """The running batch is evidence to size on: overdue, or behind the arrival."""
    return overdue(s, policy) or behind(s)


def rows_bound(s: MetricsSnapshot) -> float | None:
    """Records of the running batch: as reported, else at most the backlog (the backlog counts
    the running batch's records, which are not committed), else unknown."""
    if s.batch_in_flight_rows is not None:
        return s.batch_in_flight_rows
    return s.backlog_records


def with_batch_in_flight(s: MetricsSnapshot, policy: ScalingPolicySpec) -> MetricsSnapshot:
    """The snapshot the engine sizes on: unchanged unless the running batch is overdue or, with
    no completed batch in the window, already behind the arrival (:func:`telling`).

    Then its records (at most the backlog when unreported) are set, so the capacity model's
    wall-time fit sees its wall time per record as a lower bound of the cost. If no batch
    completed in the window, the running batch stands in for the window: one batch of its age
    over its records (a lower bound of the cost, so the capacity is an upper bound and the
    scale-out it sizes a lower bound of what is needed), and the window's processed rate, which
    only counts committed batches, is unknown rather than 0.
    """
    if not telling(s, policy):
        return s
    rows = rows_bound(s)
    if rows is None or rows <= 0:
        return s
    update: dict[str, object] = {"batch_in_flight_rows": rows}
    if not s.batches:
        update.update(
            batches=1,
            batch_duration_seconds=s.batch_in_flight_seconds,
            processed_rate=None,
            stages=(
                StageMetrics(
                    name=IN_FLIGHT_STAGE,
                    kind="source",
                    partitions=s.source_partitions,
                    rows=rows,
                ),
            ),
        )
    return s.model_copy(update=update)


def processed_bound(s: MetricsSnapshot) -> float | None:
    """Records/s the job processes at, at most: the window's processed rate when batches
    committed; where the running batch stands in for a window with none
    (:func:`with_batch_in_flight`), its records over its age (it will take longer, not less);
    else unknown."""
    if s.processed_rate is not None:
        return s.processed_rate
    age = s.batch_in_flight_seconds
    stand_in = next((st for st in s.stages if st.name == IN_FLIGHT_STAGE), None)
    if stand_in is None or stand_in.rows is None or not age:
        return None
    return stand_in.rows / age


def evidence(s: MetricsSnapshot, policy: ScalingPolicySpec) -> str | None:
    """The diagnosis line for a batch in flight that sizes the job, None otherwise."""
    rows = s.batch_in_flight_rows
    what = f" over {rows:,.0f} records" if rows is not None else ""
    if not overdue(s, policy):
        if not behind(s):
            return None
        bound = (rows_bound(s) or 0.0) / (s.batch_in_flight_seconds or 1.0)
        return (
            f"no batch committed in the window and the one in flight has run "
            f"{s.batch_in_flight_seconds:.0f} s{what}: at most {bound:,.0f} records/s against "
            f"{s.arrival_rate:,.0f} arriving, under-provisioned before it commits"
        )
    return (
        f"a batch has run {s.batch_in_flight_seconds:.0f} s{what} (the lag SLO allows batches "
        f"of {budget(s, policy):g} s): under-provisioned, the backlog ages meanwhile"
    )
