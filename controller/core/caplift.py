"""An admission cap that binds: lift it with a restart sized from the batches it capped.

The admission cap (:mod:`~controller.core.admission`) is set when a query starts and is fixed
for its life (a source reads its rate limit then). It is sized from the capacity the model
predicts at ``executors.max``; a prediction made on a light load's window is low (before the
task-cost fit has windows at two loads, :mod:`~controller.core.taskcost`, each batch's fixed
seconds count as cost per record), and a cap of two triggers at a low prediction then limits
the job itself: on real Spark (``make demo``, docs/benchmark.md) three executors capped this
way delivered about two thirds of what arrived, while the model, measuring the capped batches,
read the job as at its maximum.

The evidence that the cap binds, all measured: the window's batches read the whole cap
(:data:`CAP_READ_SHARE`), more than a batch's worth waits, the job falls behind (arrival over
the processed rate), and the capped batches end well within the span the cap was sized for
(:data:`CAP_LIFT_GAIN`). Then the query restarts at the same executors and state partitions
with the cap scaled by ``span / batch seconds``: what a batch of the span reads at the speed the
capped batches showed, a prediction from the batches themselves, not the model. A batch's fixed
seconds do not grow with its records, so such a batch ends within the span. No other threshold:
the restart obeys the cooldown and the policy's restart bounds like any other, and waits for a
window wholly after the last restart (:func:`settled`).
"""

from __future__ import annotations

import math

from contracts.runner_api import MAX_RECORDS_PER_BATCH
from controller.core.admission import admission_cap
from controller.core.capacity import CapacityModel, records_in_window
from controller.core.cooldown import cooldown
from controller.core.decision import Decision, Diagnosis, Sizing
from controller.core.inputs import Inputs
from controller.core.reasons import RESTARTING_ACTIONS, Action, Reason
from controller.core.repartition import can_restart, repartition_downtime, restart_within_budget

CAP_READ_SHARE = 0.95
"""Batches that read at least this share of the cap on average read all it allows (a capped
source fills its batch; a window's mean falls short only when the pile ran out within it)."""
CAP_LIFT_GAIN = 1.5
"""The cap is lifted only when its batches end within the span it was sized for by at least
this factor, so the restart's new cap is at least this many times the old: a restart costs
downtime, not worth paying for a small correction."""


def settled(x: Inputs) -> bool:
    """The window describes the query the cap was set on: it began after the last restart's
    query was running again (its request plus ``last_restart_seconds``), not across it."""
    s, last = x.snapshot, x.history.last_action()
    if last is None or last.action not in RESTARTING_ACTIONS:
        return True
    running_since = last.time + (s.last_restart_seconds or 0.0)
    return x.now - running_since >= (s.window_seconds or x.policy.timing.window_seconds)


def binding(x: Inputs, span_seconds: float) -> float | None:
    """The capped batches' mean seconds when the cap in force binds (see the module), else None.
    ``span_seconds``: how long a capped batch may last now."""
    s = x.snapshot
    cap, batches, seconds = s.admission_cap_records, s.batches, s.batch_duration_seconds
    rows = records_in_window(s)
    if not cap or not batches or not seconds or rows is None or s.processed_rate is None:
        return None
    fills = rows / batches >= CAP_READ_SHARE * cap
    holds_back = (s.backlog_records or 0.0) > cap
    behind = (s.arrival_rate or 0.0) > s.processed_rate
    short = seconds * CAP_LIFT_GAIN <= span_seconds
    return seconds if fills and holds_back and behind and short else None


def lift(x: Inputs, model: CapacityModel, diagnosis: Diagnosis) -> Decision | None:
    """A restart at the same layout with a larger cap when the cap in force binds (see the
    module), or None (then the job is sized as usual)."""
    s = x.snapshot
    cap = s.admission_cap_records
    planned = admission_cap(x, model, model.current_partitions)
    if cap is None or planned is None:
        return None
    seconds = binding(x, planned.span_seconds)
    if seconds is None or not settled(x) or cooldown(x, growing=True) is not None:
        return None
    downtime = repartition_downtime(x)
    if not restart_within_budget(x, can_restart(x, model, downtime), downtime):
        return None
    lifted = min(math.ceil(cap * planned.span_seconds / seconds), MAX_RECORDS_PER_BATCH)
    n, parts = model.current_executors, model.current_partitions
    return Decision(
        action=Action.REPARTITION,
        reason=Reason.ADMISSION_CAP_BOUND,
        message=(
            f"the admission cap binds: batches read all {cap:,.0f} records it allows in "
            f"{seconds:.1f} s against the {planned.span_seconds:g} s a capped batch may last, "
            f"while {s.arrival_rate or 0:,.0f} records/s arrive and "
            f"{s.processed_rate or 0:,.0f} are processed; restart at {n} executor(s) and "
            f"{parts} state partitions with batches capped at {lifted:,} records (est. "
            f"{downtime or 0:.0f} s down)"
        ),
        target_executors=n,
        target_partitions=parts,
        max_records_per_batch=lifted,
        enforced=x.enforced,
        diagnosis=diagnosis,
        sizing=Sizing(
            required_rate=s.arrival_rate,
            capacity_rate=s.processed_rate,
            recommended_executors=n,
            recommended_partitions=parts,
        ),
    )
