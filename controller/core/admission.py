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
the SLO's batch budget, :func:`~controller.core.capacity.batch_budget_seconds`) processes at the
most capacity the job can reach without another restart: ``executors.max`` over the restart's
state partitions, at full use, without the observed-gain correction
(:attr:`~controller.core.capacity.CapacityModel.gain_share`). On fewer executors a capped batch
simply lasts longer; the cap only splits what would be one giant batch.

A source reads its rate limit when its query starts, so the cap travels with the actions that
start one: a repartition (the runner's ``POST /repartition``) and a recovery (the new driver's
``--max-records-per-batch``). The runner keeps the lower of it and the job's own cap. No new
threshold beyond :data:`ADMISSION_BATCH_TRIGGERS`.
"""

from __future__ import annotations

import math
from dataclasses import replace

from controller.core.capacity import CapacityModel, Layout, batch_budget_seconds
from controller.core.inputs import Inputs

ADMISSION_BATCH_TRIGGERS = 2.0
"""A capped batch lasts about this many trigger intervals at ``executors.max``. Measured with
``make bench`` (benchmarks/scenarios.py, 2026-11-27): at 2, 49 of 63 targets and no SLO violation
in any scenario some schedule can meet; at 1 (the usual maxOffsetsPerTrigger rule: one trigger's
worth) the driver's fixed time per batch takes more of each batch, and a sustained overload
loses throughput (over-capacity: 269 s over the SLO against 240 s; 48 targets); at 3 the first
batch after a restart holds more (48 targets); uncapped, 44. The cost: beyond ``executors.max``
the overhead of more, smaller batches (over-capacity: 240 s over the SLO uncapped 211 s)."""


def _span(x: Inputs) -> float:
    """Seconds a capped batch lasts at ``executors.max``."""
    trigger = x.snapshot.trigger_interval_seconds or 0.0
    budget = batch_budget_seconds(trigger, x.policy.lag.slo_seconds)
    return min(ADMISSION_BATCH_TRIGGERS * trigger, budget) if trigger > 0 else budget


def _whole(records: float) -> int | None:
    """A cap of whole records, or None when the rate behind it is unusable (0, inf, NaN)."""
    if not math.isfinite(records) or records < 1:
        return None
    return math.ceil(records)


def admission_cap(x: Inputs, model: CapacityModel | None, partitions: int | None) -> int | None:
    """Records per batch for the query a restart starts at ``partitions`` state partitions;
    None when the job's cost is unknown (the source's own cap, if any, stays)."""
    if model is None:
        return None
    reach = Layout(x.policy.executors.max, partitions or model.current_partitions, restart=True)
    return _whole(replace(model, gain_share=1.0).capacity(reach) * _span(x))


def admission_cap_from_rate(x: Inputs, per_executor: float) -> int | None:
    """The cap when no capacity model can be had (a recovery sized from the history: the
    driver is gone, and with it the window's stage metrics): ``per_executor`` records/s at the
    target utilization, as the last action expected, scaled to full use at ``executors.max``."""
    pol = x.policy
    if per_executor <= 0 or not x.snapshot.trigger_interval_seconds:
        return None
    return _whole(per_executor / pol.utilization.target * pol.executors.max * _span(x))


def described(cap: int | None, x: Inputs) -> str:
    """The clause a decision's message carries about the cap ('' without one)."""
    if cap is None:
        return ""
    return (
        f"; batches capped at {cap:,} records after the restart (a {_span(x):g} s batch at "
        f"executors.max={x.policy.executors.max}), so what piled up drains in batches the SLO "
        "allows"
    )
