"""The model behind operators/testing/fake_runner.py: one simulated runner's state, actions and
Prometheus exposition (the runner's ``stream_autoscaler_*`` series), advanced lazily by elapsed
time. See fake_runners.py for the HTTP side and the usage."""

from __future__ import annotations

import collections
import re
import threading
from dataclasses import dataclass, field
from typing import Any

P = "stream_autoscaler_"
RECENT_ACTIONS = 16
"""Actions remembered by id, as the runner remembers them (operators/runner.py)."""
ACTION_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
MAX_STEP_SECONDS = 1.0
"""Integration step of the model: one trigger, so a burst edge moves the backlog within 1 s."""
MEMORY_USED_RATIO = 0.3
"""Executor memory in use: well under the engine's memory-pressure ratio, so it never binds."""
STATE_KEYS = 1e6
"""Distinct keys the keyed stage converges to (state rows, hence state bytes)."""
STATE_BYTES_PER_KEY = 100.0
PHASES = ("Starting", "Running", "Scaling", "Repartitioning", "Stopping", "Stopped", "Failed")
ACTION_PHASE = {"executors": "Scaling", "repartition": "Repartitioning", "stop": "Stopping"}


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
    phase: str = "Running"
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
    action: dict[str, Any] | None = None
    last_action: dict[str, Any] | None = None
    recent: collections.deque[dict[str, Any]] = field(
        default_factory=lambda: collections.deque(maxlen=RECENT_ACTIONS))
    counts: collections.Counter[str] = field(default_factory=collections.Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        c = self.config
        self.executors = self.target = c.initial_executors
        self.partitions = c.state_partitions
        self.last_progress = self.now

    def advance(self, now: float) -> None:
        """Run the model up to ``now``, finishing an action on the way. Caller holds the lock."""
        while self.now < now:
            end = min(now, self.now + MAX_STEP_SECONDS)
            if self.action is not None and self.action["_due"] <= end:
                end = max(self.now, self.action["_due"])
                self._step(end - self.now)
                self.now = end
                self._finish()
                continue
            self._step(end - self.now)
            self.now = end
        if self.action is not None and self.action["_due"] <= now:
            self._finish()

    def _step(self, dt: float) -> None:
        c = self.config
        rate = c.rate(self.now, self.phase_offset)
        self.last_rate = rate
        self.arrived += rate * dt
        self.backlog += rate * dt
        if self.phase not in ("Running", "Scaling") or dt <= 0:
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
        if a["kind"] == "executors":
            self.executors = self.target = a["params"]["target"]
        elif a["kind"] == "repartition":
            self.partitions = a["params"]["partitions"]
        a.update(state="succeeded", finished_at=a["_due"])
        a["timings"]["total"] = a["_due"] - a["started_at"]
        self.phase = "Stopped" if a["kind"] == "stop" else "Running"
        self.last_action, self.action = a, None

    def submit(self, kind: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """Validate and start an action, as JobRunner.submit and the control handler do."""
        field_name = {"executors": "target", "repartition": "partitions"}.get(kind)
        params: dict[str, Any] = {}
        if field_name is not None:
            if field_name not in body:
                return 400, {"error": f"{field_name}: required", "field": field_name}
            params[field_name] = body[field_name]
        action_id = body.get("actionId")
        if action_id is not None and (
                not isinstance(action_id, str) or not ACTION_ID.match(action_id)):
            return 400, {"error": "actionId: 1-64 characters of [A-Za-z0-9._-]",
                         "field": "actionId"}
        known = self._find(action_id)
        if known is not None:
            known["duplicates"] += 1
            self.counts[kind + ".duplicate"] += 1
            return 200, {"action": known["id"], "kind": known["kind"], "params": known["params"],
                         "state": known["state"], "duplicate": True, "phase": self.phase}
        allowed = self.action is None and (
            self.phase == "Running" or (kind == "stop" and self.phase == "Failed"))
        if not allowed:
            self.counts[kind + ".conflict"] += 1
            busy = f"; action {self.action['id']} ({self.action['kind']}) in progress" if (
                self.action) else ""
            return 409, {"error": f"runner is {self.phase}{busy}", "phase": self.phase,
                         "action": _public(self.action) if self.action else None}
        error = self._invalid(kind, params)
        if error:
            self.counts[kind + ".invalid"] += 1
            return 400, {"error": error, "field": field_name}
        c = self.config
        seconds = {"executors": c.scale_seconds, "repartition": c.repartition_seconds,
                   "stop": c.stop_seconds}[kind]
        self.action = {"kind": kind, "params": params, "id": action_id or _new_id(),
                       "state": "running", "started_at": self.now, "finished_at": None,
                       "timings": {}, "result": {}, "error": None, "duplicates": 0,
                       "_due": self.now + seconds}
        self.recent.append(self.action)
        self.phase = ACTION_PHASE[kind]
        self.counts[kind] += 1
        return 202, {"action": self.action["id"], "kind": kind, "params": params,
                     "state": "running", "phase": self.phase}

    def _find(self, action_id: str | None) -> dict[str, Any] | None:
        if not action_id:
            return None
        if self.action is not None and self.action["id"] == action_id:
            return self.action
        return next((a for a in self.recent if a["id"] == action_id), None)

    def _invalid(self, kind: str, params: dict[str, Any]) -> str | None:
        n = next(iter(params.values()), None)
        if kind == "executors":
            ceiling = max(self.config.max_executors, self.config.initial_executors)
            if not isinstance(n, int) or isinstance(n, bool) or not 0 <= n <= ceiling:
                return f"target: an integer in 0..{ceiling} (max executors)"
        if kind == "repartition" and (
                not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= 4096):
            return "partitions: an integer in 1..4096"
        return None

    def status(self) -> dict[str, Any]:
        """What JobRunner.status() shows (the fields a controller reads)."""
        c = self.config
        live = self.executors if self.phase not in ("Stopped", "Failed") else 0
        batches = int(self.batches)
        return {
            "job": self.name, "phase": self.phase, "queryId": f"fake-{self.name}",
            "executors": {"live": live, "target": self.target, "cores": c.cores, "list": []},
            "partitions": self.partitions,
            "lastCommittedBatch": batches - 1 if batches else None, "resumedFromBatch": None,
            "rates": {"arrival_rows_per_second": self.last_rate,
                      "input_rows_per_second": self.last_processed_rate,
                      "processed_rows_per_second": self.last_processed_rate},
            "backlog": {"records": self.backlog, "ageSeconds": self.backlog_age()},
            "batchDurationSeconds": c.overhead_seconds + self.last_processed_rate
            * c.trigger_seconds * self.per_record_seconds(),
            "stages": None, "statefulTasksByExecutor": None, "lastError": None,
            "action": _public(self.action) if self.action else None,
            "lastAction": _public(self.last_action) if self.last_action else None,
            "recentActions": [_public(a) for a in self.recent],
        }

    def backlog_age(self) -> float:
        return self.backlog / self.last_rate if self.last_rate > 0 else 0.0

    def metrics(self) -> str:
        """Prometheus text exposition of this job's series (a format string, filled in)."""
        c, b = self.config, int(self.batches)
        phases = [1 if p == self.phase else 0 for p in PHASES]
        live = self.executors if self.phase not in ("Stopped", "Failed") else 0
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


def _public(action: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in action.items() if not k.startswith("_")}


_ids = iter(range(1, 1 << 62))


def _new_id() -> str:
    return f"fake{next(_ids):08x}"


_JOB_SERIES = (
    "arrival_rows_per_second", "input_rows_per_second", "processed_rows_per_second",
    "input_rows_total", "batches_total", "batch_duration_seconds_sum",
    "batch_duration_seconds_count", "batch_overhead_seconds_sum", "batch_overhead_seconds_count",
    "trigger_interval_seconds", "backlog_records", "backlog_age_seconds", "executors",
    "executor_cores", "target_executors", "task_slots", "source_partitions", "state_partitions",
    "last_committed_batch", "last_progress_timestamp_seconds", "executor_memory_used_ratio")
_STATE_SERIES = ("state_rows", "state_bytes", "state_memory_bytes", "state_operator_partitions")
_STAGE_SERIES = ("stage_rows_total", "stage_busy_seconds_total", "stage_wall_seconds_total",
                 "stage_tasks", "stage_max_task_seconds", "stage_median_task_seconds")
"""Series in the order :meth:`FakeJob.metrics` fills them (names and labels as operators/exporter.py
exports them; untyped, which Prometheus and the parser read the same)."""


def _template() -> str:
    def labels(extra: str = "") -> str:
        return '{{job="{job}"' + extra + "}}"

    lines = [f"{P}up{labels()} 1", f"{P}failed_tasks_total{labels()} 0"]
    lines += [P + "phase" + labels(f',phase="{p}"') + " {}" for p in PHASES]
    lines += [f"{P}{name}{labels()} {{}}" for name in _JOB_SERIES]
    lines += [P + name + labels(',operator="counts"') + " {}" for name in _STATE_SERIES]
    for op, kind in (("source", "source"), ("counts", "stateful")):
        stage = labels(f',operator="{op}",kind="{kind}"')
        lines += [f"{P}{name}{stage} {{}}" for name in _STAGE_SERIES]
    return "\n".join(lines) + "\n"


_TEMPLATE = _template()
