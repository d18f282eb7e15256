"""The model behind operators/testing/fake_runner.py: one simulated runner's state, actions and
Prometheus exposition (the runner's series of :mod:`contracts.metric_names`), advanced lazily by
elapsed time. Requests, answers and ``/status`` are the models of :mod:`contracts.runner_api`.
See fake_runner.py for the HTTP side and the usage."""

from __future__ import annotations

import collections
import threading
from dataclasses import dataclass, field
from typing import Any

from contracts import metric_names as M
from contracts.runner_api import (
    PHASE_DURING,
    RECENT_ACTIONS,
    ActionAnswer,
    ActionKind,
    ActionRecord,
    ActionState,
    BacklogStatus,
    ConflictResponse,
    Executors,
    ExecutorsRequest,
    Phase,
    Rates,
    RequestError,
    RunnerStatus,
    WireModel,
    accepts,
    find_action,
    parse_request,
)

MAX_STEP_SECONDS = 1.0
"""Integration step of the model: one trigger, so a burst edge moves the backlog within 1 s."""
MEMORY_USED_RATIO = 0.3
"""Executor memory in use: well under the engine's memory-pressure ratio, so it never binds."""
STATE_KEYS = 1e6
"""Distinct keys the keyed stage converges to (state rows, hence state bytes)."""
STATE_BYTES_PER_KEY = 100.0


@dataclass(frozen=True)
class ModelConfig:
    """One job's model; rates in records/s, times in seconds."""

    base_rate: float = 2_000.0
    burst_rate: float = 12_000.0
    period_seconds: float = 300.0
    burst_share: float = 0.3
    """Share of each period at ``burst_rate``."""
    slot_rate: float = 5_000.0
    """Records/s one slot carries through both stages (40% read, 60% keyed, as the simulator)."""
    cores: int = 1
    initial_executors: int = 2
    max_executors: int = 32
    state_partitions: int = 4
    source_partitions: int = 16
    trigger_seconds: float = 1.0
    overhead_seconds: float = 0.1
    scale_seconds: float = 2.0
    repartition_seconds: float = 5.0
    stop_seconds: float = 1.0

    def rate(self, t: float, phase_offset: float) -> float:
        """The square-wave input rate at ``t``."""
        at = (t + phase_offset) % self.period_seconds
        return self.burst_rate if at < self.burst_share * self.period_seconds else self.base_rate


@dataclass
class FakeJob:
    """One simulated runner: its model state, counters and action records."""

    name: str
    token: str
    config: ModelConfig
    phase_offset: float
    now: float
    phase: Phase = Phase.RUNNING
    executors: int = 0
    target: int = 0
    partitions: int = 0
    arrived: float = 0.0
    processed: float = 0.0
    backlog: float = 0.0
    batches: float = 0.0
    busy: list[float] = field(default_factory=lambda: [0.0, 0.0])
    wall: list[float] = field(default_factory=lambda: [0.0, 0.0])
    duration_sum: float = 0.0
    last_rate: float = 0.0
    last_processed_rate: float = 0.0
    last_progress: float = 0.0
    action: ActionRecord | None = None
    action_due: float = 0.0
    """When the running action finishes (model time)."""
    last_action: ActionRecord | None = None
    recent: collections.deque[ActionRecord] = field(
        default_factory=lambda: collections.deque(maxlen=RECENT_ACTIONS))
    counts: collections.Counter[str] = field(default_factory=collections.Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        c = self.config
        self.executors = self.target = c.initial_executors
        self.partitions = c.state_partitions
        self.max_records_per_batch: int | None = None
        """The admission cap the last repartition set (reported, as the runner does)."""
        self.last_progress = self.now

    def advance(self, now: float) -> None:
        """Run the model up to ``now``, finishing an action on the way. Caller holds the lock."""
        while self.now < now:
            end = min(now, self.now + MAX_STEP_SECONDS)
            if self.action is not None and self.action_due <= end:
                end = max(self.now, self.action_due)
                self._step(end - self.now)
                self.now = end
                self._finish()
                continue
            self._step(end - self.now)
            self.now = end
        if self.action is not None and self.action_due <= now:
            self._finish()

    def _step(self, dt: float) -> None:
        c = self.config
        rate = c.rate(self.now, self.phase_offset)
        self.last_rate = rate
        self.arrived += rate * dt
        self.backlog += rate * dt
        if self.phase not in (Phase.RUNNING, Phase.SCALING) or dt <= 0:
            self.last_processed_rate = 0.0
            return
        slots = self.executors * c.cores
        if slots <= 0:
            self.last_processed_rate = 0.0
            return
        per_record = self.per_record_seconds()
        useful = max(0.0, c.trigger_seconds - c.overhead_seconds) / c.trigger_seconds
        rows = min(self.backlog, dt * useful / per_record)
        batches = dt / c.trigger_seconds if rows > 0 else 0.0  # Spark runs no empty batches
        self.backlog -= rows
        self.processed += rows
        self.batches += batches
        cost = (0.4 / c.slot_rate, 0.6 / c.slot_rate)
        caps = (min(slots, c.source_partitions), min(slots, self.partitions))
        for i in (0, 1):
            self.busy[i] += rows * cost[i]
            self.wall[i] += rows * cost[i] / caps[i]
        self.duration_sum += batches * c.overhead_seconds + rows * per_record
        self.last_processed_rate = rows / dt
        self.last_progress = self.now + dt

    def per_record_seconds(self) -> float:
        """Wall seconds per record through both stages at the current layout."""
        c = self.config
        slots = max(1, self.executors * c.cores)
        return (0.4 / c.slot_rate) / min(slots, c.source_partitions) + (0.6 / c.slot_rate) / min(
            slots, self.partitions)

    def _finish(self) -> None:
        a = self.action
        assert a is not None
        if a.kind == ActionKind.EXECUTORS:
            self.executors = self.target = a.params["target"]
        elif a.kind == ActionKind.REPARTITION:
            self.partitions = a.params["partitions"]
            self.max_records_per_batch = a.params.get("max_records_per_batch")
        a.state, a.finished_at = ActionState.SUCCEEDED, self.action_due
        a.timings["total"] = self.action_due - a.started_at
        self.phase = Phase.STOPPED if a.kind == ActionKind.STOP else Phase.RUNNING
        self.last_action, self.action = a, None

    def submit(self, kind: ActionKind, body: Any) -> tuple[int, WireModel]:
        """Validate and start an action, as the control handler and JobRunner.submit do."""
        try:
            request = parse_request(kind, body)
        except RequestError as e:
            if e.field not in ("body", "actionId") and not str(e).endswith(": required"):
                self.counts[kind + ".invalid"] += 1
            return 400, e.response()
        known = find_action(self.action, self.recent, request.action_id)
        if known is not None:
            known.duplicates += 1
            self.counts[kind + ".duplicate"] += 1
            return 200, ActionAnswer.of(known, self.phase, duplicate=True)
        if not accepts(self.phase, kind, busy=self.action is not None):
            self.counts[kind + ".conflict"] += 1
            return 409, ConflictResponse.of(self.phase, self.action)
        if isinstance(request, ExecutorsRequest):
            try:
                request.within(max(self.config.max_executors, self.config.initial_executors))
            except RequestError as e:
                self.counts[kind + ".invalid"] += 1
                return 400, e.response()
        c = self.config
        seconds = {ActionKind.EXECUTORS: c.scale_seconds,
                   ActionKind.REPARTITION: c.repartition_seconds,
                   ActionKind.STOP: c.stop_seconds}[request.kind]
        self.action = ActionRecord(kind=request.kind, id=request.action_id or _new_id(),
                                   params=request.model_dump(exclude={"action_id"}),
                                   started_at=self.now)
        self.action_due = self.now + seconds
        self.recent.append(self.action)
        self.phase = PHASE_DURING[request.kind]
        self.counts[kind] += 1
        return 202, ActionAnswer.of(self.action, self.phase)

    def status(self) -> RunnerStatus:
        """What JobRunner.status() shows (the fields a controller reads)."""
        c = self.config
        live = self.executors if self.phase not in (Phase.STOPPED, Phase.FAILED) else 0
        batches = int(self.batches)
        return RunnerStatus(
            job=self.name, phase=self.phase, query_id=f"fake-{self.name}",
            executors=Executors(live=live, target=self.target, cores=c.cores),
            partitions=self.partitions,
            last_committed_batch=batches - 1 if batches else None,
            rates=Rates(arrival_rows_per_second=self.last_rate,
                        input_rows_per_second=self.last_processed_rate,
                        processed_rows_per_second=self.last_processed_rate),
            backlog=BacklogStatus(records=self.backlog, age_seconds=self.backlog_age()),
            batch_duration_seconds=c.overhead_seconds + self.last_processed_rate
            * c.trigger_seconds * self.per_record_seconds(),
            max_records_per_batch=self.max_records_per_batch,
            action=self.action, last_action=self.last_action, recent_actions=list(self.recent),
        )

    def backlog_age(self) -> float:
        return self.backlog / self.last_rate if self.last_rate > 0 else 0.0

    def metrics(self) -> str:
        """Prometheus text exposition of this job's series (a format string, filled in)."""
        c, b = self.config, int(self.batches)
        phases = [1 if p == self.phase else 0 for p in Phase]
        live = self.executors if self.phase not in (Phase.STOPPED, Phase.FAILED) else 0
        stage_tasks = (c.source_partitions, self.partitions)
        keys = min(self.processed, STATE_KEYS)
        per_task = [self.wall[i] / max(1.0, self.batches) for i in (0, 1)]
        return _TEMPLATE.format(
            *phases, self.last_rate, self.last_processed_rate, self.last_processed_rate,
            self.processed, self.batches, self.duration_sum, self.batches,
            self.batches * c.overhead_seconds, self.batches,
            c.trigger_seconds, self.backlog, self.backlog_age(), live, c.cores, self.target,
            live * c.cores, c.source_partitions, self.partitions, b - 1,
            self.last_progress, MEMORY_USED_RATIO, keys, keys * STATE_BYTES_PER_KEY,
            keys * STATE_BYTES_PER_KEY / 4,
            self.partitions, self.processed, self.busy[0], self.wall[0], stage_tasks[0],
            per_task[0], per_task[0], self.processed, self.busy[1], self.wall[1],
            stage_tasks[1], per_task[1], per_task[1], job=self.name)


_ids = iter(range(1, 1 << 62))


def _new_id() -> str:
    return f"fake{next(_ids):08x}"


_JOB_SERIES = (
    M.ARRIVAL_RATE.full, M.INPUT_RATE.full, M.PROCESSED_RATE.full, M.INPUT_ROWS.total,
    M.BATCHES.total, *M.BATCH_DURATION.series, *M.BATCH_OVERHEAD.series,
    M.TRIGGER_INTERVAL.full, M.BACKLOG_RECORDS.full, M.BACKLOG_AGE.full, M.EXECUTORS.full,
    M.EXECUTOR_CORES.full, M.TARGET_EXECUTORS.full, M.TASK_SLOTS.full, M.SOURCE_PARTITIONS.full,
    M.STATE_PARTITIONS.full, M.LAST_COMMITTED_BATCH.full, M.LAST_PROGRESS.full,
    M.EXECUTOR_MEMORY_RATIO.full)
_STATE_SERIES = (M.STATE_ROWS.full, M.STATE_BYTES.full, M.STATE_MEMORY.full,
                 M.STATE_OPERATOR_PARTITIONS.full)
_STAGE_SERIES = (M.STAGE_ROWS.total, M.STAGE_BUSY.total, M.STAGE_WALL.total, M.STAGE_TASKS.full,
                 M.STAGE_MAX_TASK.full, M.STAGE_MEDIAN_TASK.full)
"""Series in the order :meth:`FakeJob.metrics` fills them (names and labels as
:mod:`contracts.metric_names` declares them; untyped, which Prometheus and the parser read the
same)."""


def _template() -> str:
    def labels(extra: str = "") -> str:
        return '{{job="{job}"' + extra + "}}"

    lines = [f"{M.UP.full}{labels()} 1", f"{M.FAILED_TASKS.total}{labels()} 0"]
    # a fake batch takes no time: none is ever in flight (start 0; id and rows absent)
    lines += [f"{M.BATCH_IN_FLIGHT_START.full}{labels()} 0"]
    lines += [M.PHASE.full + labels(f',phase="{p}"') + " {}" for p in Phase]
    lines += [f"{name}{labels()} {{}}" for name in _JOB_SERIES]
    lines += [name + labels(',operator="counts"') + " {}" for name in _STATE_SERIES]
    for op, kind in (("source", "source"), ("counts", "stateful")):
        stage = labels(f',operator="{op}",kind="{kind}"')
        lines += [f"{name}{stage} {{}}" for name in _STAGE_SERIES]
    return "\n".join(lines) + "\n"


_TEMPLATE = _template()
