"""The capacity model of a micro-batch: how fast a job can go at a given size.

A micro-batch runs its stages one after another on the same task slots. Stage ``s`` costs
``cost[s]`` task-seconds per source record (DS2's true rate, inverted: measured over busy task
time, not wall time) and runs in ``ceil(partitions[s] / slots)`` waves of tasks; the batch also
pays a fixed driver overhead that executors do not shrink. So, at arrival rate ``R`` and trigger
interval ``I``, the busy fraction of the time a batch has for work (the interval less the
overhead) is::

    U(R, slots, P) = R * sum_s cost[s] * spread[s] * ceil(P_s / slots_s) / P_s / (1 - overhead/I)

So utilization means the same with a 0.1 s or a 0.5 s overhead: the share of the executors' time
budget in use. The overhead itself is reported (and a longer trigger suggested), not scaled.

The budget is the longest batch the lag SLO allows (:func:`batch_budget_seconds`), not the
trigger alone: a job that falls behind its trigger runs longer batches that amortize the overhead
(Spark starts the next batch at once, with everything that arrived), and the SLO, not the trigger,
is the promise. A record waits for the batch running when it arrives, then for its own, so a job
whose batches take ``B`` seconds lags up to about ``2B`` (:data:`LAG_PER_BATCH`): batches may
last up to ``max(trigger, SLO / 2)``. At utilization ``u`` of that budget the batches settle at
``overhead / (1 - u * (1 - overhead / budget))``, within the budget for any ``u <= 1``.

``spread[s] >= 1`` is a wall-time inflation over a perfect spread (stragglers, task launch, stage
barriers). Busy time is trusted first (DS2): at a light load the wall time is mostly fixed
per-task cost, and wall times mix batches that ran at different parallelism. But a job whose
batches fill :data:`WALL_FIT_BATCH_SHARE` of the trigger shows its real cost at its layout: when
the batches' wall time per record (less the fixed overhead) exceeds the busy-time model by more
than :data:`WALL_FIT_MIN_RATIO`, every stage's spread is that ratio (:func:`wall_fit`), so a job
that falls behind is never credited with a capacity it does not deliver.
For the stateful stage, ``slots_s`` is capped by the slots of the executors that hold its state
(:func:`state_holders`: those the query last started with, less any scaled in since): stateful
tasks stick to the executors with their state store (docs/spark-facts.md), so executors added in
place help it only after a restart or repartition.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace

from contracts.history import ScalingHistory
from controller.core.reasons import RESTARTING_ACTIONS
from controller.core.snapshot import MetricsSnapshot, StageKind

_PSEUDO_STAGE = "job"

LAG_PER_BATCH = 2.0
"""The lag of a job whose batches take ``B`` seconds reaches about ``LAG_PER_BATCH * B``: a record
waits for the batch running when it arrives, then is processed by the next."""

WALL_FIT_BATCH_SHARE = 0.8
"""From batches this long (share of the trigger interval) on, their wall time is the job's cost:
the fixed per-task cost that inflates short batches is then a small part of it."""

WALL_FIT_MIN_RATIO = 1.15
"""Wall time per record over the busy-time model below this ratio is noise (metrics timing,
task launch): the model stays as measured."""

MAX_FIXED_SHARE = 0.95
"""At most this share of a stage's busy time is taken out as fixed per-task cost, so every stage
keeps a cost per record (the fit, :mod:`controller.core.taskcost`, is bounded the same way). On
real Spark at a light load the fixed part was ~90% of a stateful task (docs/spark-facts.md)."""

WAVE_STEP = 1.5
"""Capacity grows in task waves, so the fewest executors at the target utilization can be a
whole wave away: 8 partitions busy 75% on 4 executors reach 70% only on 8. When the layout at
the target needs this many times the executors of one still under ``utilization.high``, the
latter is sized for (:func:`sized_layouts`): the headroom the target buys is not worth a wave."""


def rate_per_executor(history: ScalingHistory, until: float | None = None) -> float:
    """Records/s per executor the last sized entry (an action or a recommendation, at or before
    ``until``) expected its executors to sustain at the target utilization; 0 when none was
    sized. Recovery sizes on it (:func:`controller.core.failure.catch_up_size`), and the
    recovery's transient is told from it (:func:`controller.core.cooldown.recovery_transient`)."""
    known = [e for e in history.entries if e.expected_rate and e.executors
             and (until is None or e.time <= until)]  # fmt: skip
    if not known:
        return 0.0
    last = known[-1]
    return (last.expected_rate or 0.0) / (last.executors or 1)


@dataclass(frozen=True)
class StageCost:
    """One stage's cost and parallelism cap."""

    name: str
    kind: StageKind
    cost: float
    """Task-seconds per source record."""
    partitions: int | None
    """Tasks per batch; None = as many as there are slots."""
    spread: float = 1.0
    """Observed wall time / ideal wall time (>= 1)."""
    task_seconds: float = 0.0
    """Fixed seconds each task pays whatever it reads (:mod:`controller.core.taskcost`); ``cost``
    is then the rest, per record."""


@dataclass(frozen=True)
class Layout:
    """A candidate size: executors, state partitions, and whether state gets re-spread."""

    executors: int
    partitions: int | None
    restart: bool
    """True if the query restarts (repartition or recovery), so state spreads over all slots."""


@dataclass(frozen=True)
class CapacityModel:
    """Stage costs of one job, measured from a snapshot."""

    stages: tuple[StageCost, ...]
    overhead_seconds: float
    interval_seconds: float
    cores_per_executor: int
    current_executors: int
    current_partitions: int | None
    batch_seconds: float = 0.0
    """Mean batch duration in the window (s); longer than the trigger while catching up."""
    wall_ratio: float = 1.0
    """The spread applied from :func:`wall_fit` (1 = the busy-time model as measured)."""
    budget_seconds: float = 0.0
    """The batch-time budget (s): the longest batch the lag SLO allows
    (:func:`batch_budget_seconds`); 0 = the trigger interval."""
    extra_fixed_seconds: float = 0.0
    """Fixed wall time per batch beyond the driver's overhead and the tasks' fixed costs: what
    the batches' own fit found (:func:`wall_fit`), e.g. the gaps between task waves."""
    gain_share: float = 1.0
    """Share of a modelled gain beyond the current executors that is credited: what the last
    scale-out delivered of the gain it promised, observed while the job is still saturated
    (:func:`controller.core.guards.observed_gain_share`; Flink 1.12's scalability coefficient).
    1 = the gains as modelled."""
    state_executors: int | None = None
    """Executors holding the stateful stage's state (:func:`state_holders`); None = the current
    executors. Its tasks run on their slots only, until a restart spreads the state."""

    @staticmethod
    def from_snapshot(
        s: MetricsSnapshot,
        slo_seconds: float | None = None,
        task_seconds: Mapping[str, float] | None = None,
        state_executors: int | None = None,
    ) -> CapacityModel | None:
        """The model, or None when the snapshot cannot tell the costs (idle or unknown).
        ``slo_seconds``: the lag SLO the batch-time budget derives from (None: the trigger).
        ``task_seconds``: each stage's fixed cost per task, by name
        (:func:`controller.core.taskcost.fixed_task_seconds`): taken out of its busy time (never
        more than :data:`MAX_FIXED_SHARE` of it) and counted per task wave instead.
        ``state_executors``: the executors holding state (:func:`state_holders`; None: all)."""
        if s.executors is None or s.window_seconds is None:
            return None
        records = records_in_window(s)
        if records is None or records <= 0:
            return None
        cores = s.cores_per_executor or 1
        slots = max(1, s.executors * cores)
        stages: list[StageCost] = []
        for st in s.stages:
            if st.busy_seconds is None:
                continue
            cap = st.partitions
            if st.kind == "source" and s.source_partitions is not None:
                cap = s.source_partitions
            fixed = (task_seconds or {}).get(st.name, 0.0)
            tasks = (st.partitions or 0) * (s.batches or 0)
            fixed_busy = min(fixed * tasks, MAX_FIXED_SHARE * st.busy_seconds)
            per_task = fixed_busy / tasks if tasks else 0.0
            stages.append(StageCost(st.name, st.kind, (st.busy_seconds - fixed_busy) / records,
                                    cap, task_seconds=per_task))  # fmt: skip
        if not stages:
            fallback = _fallback_stage(s, records, slots)
            if fallback is None:
                return None
            stages.append(fallback)
        stateful = s.stateful_stage()
        measured = CapacityModel(
            stages=tuple(stages),
            overhead_seconds=s.overhead_seconds or 0.0,
            interval_seconds=s.trigger_interval_seconds or 0.0,
            cores_per_executor=cores,
            current_executors=s.executors,
            current_partitions=stateful.partitions if stateful else None,
            batch_seconds=max(s.batch_duration_seconds or 0.0, s.batch_in_flight_seconds or 0.0),
            budget_seconds=batch_budget_seconds(s.trigger_interval_seconds or 0.0, slo_seconds),
            state_executors=state_executors,
        )
        stateful_parts = stateful.partitions if stateful else None
        batch_fixed = (task_seconds or {}).get(batch_key(s.executors, stateful_parts), 0.0)
        return wall_fit(measured, s, records, batch_fixed)

    # -- the model --------------------------------------------------------------------------

    def overhead_share(self) -> float:
        """Fixed driver time as a fraction of the trigger interval (0 with no interval)."""
        if self.interval_seconds <= 0:
            return 0.0
        return self.overhead_seconds / self.interval_seconds

    def work_seconds_per_record(self, layout: Layout) -> float:
        """Wall seconds of batch work per source record at ``layout``. Beyond the current
        executors only :attr:`gain_share` of the modelled gain in capacity is credited."""
        if layout.executors * self.cores_per_executor <= 0:
            return math.inf
        w = sum(self.stage_seconds_per_record(st, layout) for st in self.stages)
        if self.gain_share >= 1.0 or layout.executors <= self.current_executors:
            return w
        now = self.work_seconds_per_record(
            Layout(self.current_executors, self.current_partitions, restart=False)
        )
        if not (0 < w < now and math.isfinite(now)):
            return w  # no gain to discount (or none measurable)
        return 1.0 / (1.0 / now + self.gain_share * (1.0 / w - 1.0 / now))

    def stage_seconds_per_record(self, st: StageCost, layout: Layout) -> float:
        """One stage's wall seconds per source record at ``layout``, in task waves.

        A stage of ``p`` tasks on ``u`` usable slots runs ``ceil(p / u)`` waves, each as long as
        one task (``cost / p`` per record): 8 partitions take two waves on 5, 6 or 7 slots as on
        4, so slots that do not cut a wave add nothing. Without a known task count the stage
        spreads over every slot. The stateful stage's usable slots are those that held state
        when the query last started, unless the layout restarts it."""
        usable = self._usable_slots(st, layout)
        if usable <= 0:
            return math.inf
        tasks = layout.partitions if st.kind == "stateful" else st.partitions
        if not tasks:
            return st.cost * st.spread / usable
        return st.cost * st.spread * math.ceil(tasks / usable) / tasks

    def _usable_slots(self, st: StageCost, layout: Layout) -> int:
        """Slots a stage's tasks can run on at ``layout``: all of them, but for the stateful
        stage without a restart only those of the executors holding its state."""
        slots = layout.executors * self.cores_per_executor
        if st.kind == "stateful" and not layout.restart and slots > 0:
            return min(slots, max(1, self.state_holding_executors() * self.cores_per_executor))
        return slots

    def state_holding_executors(self) -> int:
        """Executors holding the stateful stage's state now (never more than the current)."""
        if self.state_executors is None:
            return self.current_executors
        return min(self.current_executors, self.state_executors)

    def spreads_state(self, layout: Layout) -> bool:
        """``layout`` restarts the query onto more executors than hold its state now: a restart
        at the same partitions then still grows the stateful stage's slots."""
        return layout.restart and layout.executors > self.state_holding_executors()

    def overhead_share_of_batch(self) -> float:
        """Fixed driver time as a share of the longest batch the job may run: the batch-time
        budget the SLO allows, or the (longer) batch while it catches up, when big batches
        amortize it."""
        span = max(self.interval_seconds, self.budget_seconds, self.batch_seconds)
        if span <= 0:
            return 0.0
        return min(1.0, self.overhead_seconds / span)

    def fixed_seconds(self, layout: Layout | None = None) -> float:
        """Wall seconds every batch pays whatever it reads at ``layout`` (default: the current
        one): the driver's overhead, the batches' extra fixed time, and per stage one fixed
        task cost per task wave."""
        lay = layout or Layout(self.current_executors, self.current_partitions, restart=False)
        return self.overhead_seconds + self.extra_fixed_seconds + sum(
            st.task_seconds * self.waves(st, lay) for st in self.stages if st.task_seconds > 0
        )

    def waves(self, st: StageCost, layout: Layout) -> int:
        """Task waves of one stage per batch at ``layout`` (1 when its task count is unknown)."""
        usable = self._usable_slots(st, layout)
        tasks = layout.partitions if st.kind == "stateful" else st.partitions
        if not tasks or usable <= 0:
            return 1
        return math.ceil(tasks / usable)

    def budget_share(self, layout: Layout | None = None) -> float:
        """Share of the batch-time budget left for work after the fixed time at ``layout``."""
        span = max(self.interval_seconds, self.budget_seconds)
        if span <= 0:
            return 1.0
        return 1.0 - self.fixed_seconds(layout) / span

    def utilization(self, rate: float, layout: Layout) -> float:
        """Busy fraction of the work budget needed to process ``rate`` records/s."""
        budget = self.budget_share(layout)
        if budget <= 0:
            return math.inf
        return rate * self.work_seconds_per_record(layout) / budget

    def capacity(self, layout: Layout, utilization: float = 1.0) -> float:
        """Records/s sustainable at ``layout`` while busy at most ``utilization``."""
        w = self.work_seconds_per_record(layout)
        budget = self.budget_share(layout)
        if budget <= 0 or not math.isfinite(w):
            return 0.0
        if w <= 0:
            return math.inf
        return utilization * budget / w

    def binding_stage(self, layout: Layout) -> StageCost:
        """The stage with the most wall time per record at ``layout``."""
        return max(self.stages, key=lambda st: self.stage_seconds_per_record(st, layout))


def sized_layouts(
    model: CapacityModel, required: float, candidates: list[Layout], target: float, high: float
) -> list[Layout]:
    """The candidates (fewest executors first) that carry ``required`` at the ``target``
    utilization, and those under ``high`` whose executors are at most ``1 / WAVE_STEP`` of the
    fewest at the target (a task wave away, :data:`WAVE_STEP`)."""
    at_target = [lay for lay in candidates if model.utilization(required, lay) <= target]
    if not at_target:
        return []
    step = at_target[0].executors / WAVE_STEP
    under_high = [
        lay
        for lay in candidates
        if lay.executors <= step and model.utilization(required, lay) <= high
    ]
    return sorted({*under_high, *at_target}, key=lambda lay: (lay.executors, lay.restart))


def state_holders(history: ScalingHistory, executors: int) -> int | None:
    """The executors that hold the stateful stage's state, from the recorded actions; None when
    the history cannot tell (no action recorded, or none with the executors it started from).

    A restart (repartition, recovery) spreads state over the executors it starts with. An
    in-place scale-out adds none: stateful tasks stay with their state stores. An in-place
    scale-in moves the state of the executors removed onto those left, as does losing one, so
    the holders are never more than ``executors`` (the current count). Before the first
    restart on record, the state is on the executors of the first in-place move's start."""
    held: int | None = None
    for e in history.entries:
        if e.kind != "action" or e.executors is None:
            continue
        if e.action in RESTARTING_ACTIONS:
            held = e.executors
            continue
        if held is None:
            held = e.executors_before
        if held is not None:
            held = min(held, e.executors)
    return None if held is None else max(1, min(held, executors))


def batch_budget_seconds(interval: float, slo_seconds: float | None) -> float:
    """The longest batch the lag SLO allows: ``max(trigger, SLO / LAG_PER_BATCH)``; the trigger
    when no SLO is given."""
    if slo_seconds is None:
        return interval
    return max(interval, slo_seconds / LAG_PER_BATCH)


def wall_fit(
    model: CapacityModel, s: MetricsSnapshot, records: float, batch_fixed: float = 0.0
) -> CapacityModel:
    """``model`` with every stage's spread set to the batches' observed wall time over the
    modelled one, when the batches are long enough to show it and the gap is real. A batch
    still running (``batch_in_flight_seconds`` over ``batch_in_flight_rows``) counts too: its
    age is a lower bound of its wall time, so its ratio is a lower bound.

    The batch's work (its wall time less the driver's overhead) is compared with the modelled
    work, fixed task costs included, and both are inflated alike: what every batch pays however
    few records it reads is never taken for a cost per record alone. ``batch_fixed``: the fixed
    wall time of a batch at this layout, fitted over windows at different loads
    (:func:`batch_key`, :mod:`controller.core.taskcost`); what it holds beyond the overhead and
    the tasks' fixed costs (the gaps between task waves) becomes
    :attr:`CapacityModel.extra_fixed_seconds`, part of the modelled work."""
    if model.interval_seconds <= 0 or records <= 0:
        return model
    current = Layout(model.current_executors, model.current_partitions, restart=False)
    w = model.work_seconds_per_record(current)
    if not math.isfinite(w) or w <= 0:
        return model
    tasks_fixed = model.fixed_seconds(current) - model.overhead_seconds
    if batch_fixed > model.overhead_seconds:
        model = replace(model, extra_fixed_seconds=max(
            0.0, batch_fixed - model.overhead_seconds - tasks_fixed))
        tasks_fixed = model.fixed_seconds(current) - model.overhead_seconds

    def ratio_of(wall: float, n: float) -> float:
        """Observed over modelled work, for one batch of ``n`` records that took ``wall`` s:
        the fixed part is in both, so a few records' tiny cost never takes a gap for itself."""
        return (wall - model.overhead_seconds) / (tasks_fixed + n * w)

    base = model.overhead_seconds + tasks_fixed
    long_enough = WALL_FIT_BATCH_SHARE * model.interval_seconds
    ratio = 0.0
    mean = s.batch_duration_seconds or 0.0
    if s.batches and mean >= long_enough and mean > base:
        ratio = ratio_of(mean, records / s.batches)
    running, rows = s.batch_in_flight_seconds, s.batch_in_flight_rows
    if running is not None and rows and running >= long_enough and running > base:
        ratio = max(ratio, ratio_of(running, rows))
    if ratio < WALL_FIT_MIN_RATIO:
        return model
    stages = tuple(
        replace(st, spread=st.spread * ratio, task_seconds=st.task_seconds * ratio)
        for st in model.stages
    )
    return replace(model, stages=stages, wall_ratio=ratio,
                   extra_fixed_seconds=model.extra_fixed_seconds * ratio)  # fmt: skip


def batch_key(executors: int, partitions: int | None) -> str:
    """The name cost samples of whole batches at a layout are kept under (``@batch:2x4``;
    operator names are the manifest's, which never start with ``@``)."""
    return f"@batch:{executors}x{partitions or 0}"


def records_in_window(s: MetricsSnapshot) -> float | None:
    """Source records processed in the window: the read stage's rows, else rate x window."""
    for st in s.stages:
        if st.kind == "source" and st.rows is not None:
            return st.rows
    if s.processed_rate is not None and s.window_seconds is not None:
        return s.processed_rate * s.window_seconds
    return None


def _fallback_stage(s: MetricsSnapshot, records: float, slots: int) -> StageCost | None:
    """Without per-stage metrics: the whole batch as one stage, from batch durations.

    When the source's partitions are known, the batch is taken as capped by them (the read
    stage is part of every batch): without stage metrics, slots beyond the source's partitions
    are a guess, and the cap is what is known."""
    if s.batch_duration_seconds is None or s.batches is None or s.batches <= 0:
        return None
    work = max(0.0, s.batch_duration_seconds - (s.overhead_seconds or 0.0)) * s.batches
    if work <= 0:
        return None
    cap = s.source_partitions
    if cap is not None:
        waves = math.ceil(cap / slots)
        return StageCost(_PSEUDO_STAGE, "source", work * cap / waves / records, cap, 1.0)
    return StageCost(_PSEUDO_STAGE, "stateless", work * slots / records, None, 1.0)
