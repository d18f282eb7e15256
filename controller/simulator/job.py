"""The simulated job: an exact event-driven run of a micro-batch query under a trace.

Events: a batch starts (at the next trigger, or at once after an overrun), a batch commits, a
restart ends. Between events nothing changes but time, so lag, SLO violation and executor-seconds
are integrated exactly. Records are a fluid: ``arrived(t) = processed + backlog`` always holds.

What the job does on each command (docs/spark-facts.md):

- ``scale(n)``: more executors register ``executor_start_seconds`` later and then help the
  stateless stages; the stateful stage keeps running on the executors that held its state when
  the query last (re)started. Fewer executors take effect at once (pending ones go first).
- ``restart(n, p)``: stop at the next batch boundary, repartition state to ``p`` (same count: a
  plain restart), set executors to ``n``, resume once the downtime is over and the executors have
  registered; the state is then spread over every executor.
- ``kill_driver()``: the batch in flight is lost (its records return to the backlog), executors
  die with the driver, nothing runs until ``recover(n, p)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from contracts.trace import Trace
from controller.simulator.model import JobModel

EPS = 1e-9


@dataclass(frozen=True)
class StageRun:
    """One stage of one batch."""

    name: str
    kind: str
    partitions: int
    slots: int
    busy: float
    wall: float
    task: float


@dataclass(frozen=True)
class Batch:
    """One micro-batch."""

    id: int
    start: float
    end: float
    records: float
    overhead: float
    stages: tuple[StageRun, ...]


@dataclass
class JobCounters:
    """Integrals and counts over the run."""

    executor_seconds: float = 0.0
    slo_violation_seconds: float = 0.0
    max_lag_seconds: float = 0.0
    restarts: int = 0
    repartitions: int = 0
    downtime_seconds: float = 0.0
    failures: list[float] = field(default_factory=list)
    resumed: list[float] = field(default_factory=list)


class SimulatedJob:
    """A Spark micro-batch job under an input-rate trace, advanced with :meth:`advance`."""

    def __init__(
        self,
        model: JobModel,
        trace: Trace,
        *,
        executors: int,
        state_partitions: int,
        slo_seconds: float,
        auto_recover: bool = False,
    ) -> None:
        if trace.unit != "input_rate":
            trace = trace.scaled(model.load_unit_rate)
        self.model = model
        self.trace = trace
        self.slo = slo_seconds
        self.auto_recover = auto_recover
        self.t = 0.0
        self.processed = 0.0
        self.taken = 0.0
        self.batch: Batch | None = None
        self.batches: list[Batch] = []
        self.ready: list[float] = [0.0] * executors
        self.holders = executors
        self.partitions = state_partitions
        self.next_start = 0.0
        self.stopping: tuple[int, int] | None = None
        self.resume_at: float | None = None
        self.restart_target: tuple[int, int] | None = None
        self.driver_up = True
        self.failed_at: float | None = None
        self.target_before_failure = executors
        self.last_commit = 0.0
        self.restart_requested_at: float | None = None
        self.last_restart_seconds: float | None = None
        """Request to running again, of the last restart: what the runner reports."""
        self.counters = JobCounters()
        self._oldest = 0.0
        self.admission: int | None = None
        """Records per batch the controller capped the running query at (None: uncapped)."""

    # --- what the metrics see ----------------------------------------------------------------

    def live(self, t: float | None = None) -> int:
        """Registered executors at ``t`` (default now)."""
        now = self.t if t is None else t
        return sum(1 for r in self.ready if r <= now + EPS)

    @property
    def requested(self) -> int:
        """Executors asked for (running and starting): what is paid for."""
        return len(self.ready)

    def arrived(self, t: float | None = None) -> float:
        """Records arrived in ``[0, t)``."""
        return self.trace.arrived(self.t if t is None else t)

    @property
    def backlog(self) -> float:
        """Records arrived but not committed (a batch in flight counts as backlog)."""
        return max(0.0, self.arrived() - self.processed)

    def lag(self, t: float | None = None) -> float:
        """Age of the oldest unprocessed record (s) at ``t``."""
        now = self.t if t is None else t
        if self.trace.arrived(now) - self.processed <= 1e-6:
            return 0.0
        return max(0.0, now - self._oldest)

    def conservation_error(self) -> float:
        """How far ``arrived = processed + in flight + not yet taken`` is off (records); also
        catches records taken before they arrived or processed twice."""
        in_flight = self.batch.records if self.batch is not None else 0.0
        unclaimed = self.arrived() - self.taken
        err = abs(self.processed + in_flight + unclaimed - self.arrived())
        return max(err, -min(0.0, unclaimed + 1e-6), -min(0.0, in_flight))

    @property
    def state_bytes(self) -> float:
        return self.model.state_bytes(self.processed)

    @property
    def state_keys(self) -> float:
        return self.model.state_keys(self.processed)

    @property
    def down(self) -> bool:
        """Not processing: driver failed, or stopped for a restart."""
        return not self.driver_up or self.resume_at is not None

    # --- commands ----------------------------------------------------------------------------

    def scale(self, n: int) -> None:
        """Set the executor count in place."""
        n = max(0, n)
        if n > len(self.ready):
            self.ready.extend([self.t + self.model.executor_start_seconds] * (n - len(self.ready)))
        elif n < len(self.ready):
            self.ready.sort()
            del self.ready[n:]
        self.holders = min(self.holders, self.live())

    def restart(self, executors: int, partitions: int, admission: int | None = None) -> None:
        """Stop (at once, the batch in flight given up, where :meth:`_gives_up_batch`; else at
        the next batch boundary), repartition to ``partitions``, resume on ``executors``; the
        resumed query's batches read at most ``admission`` records (None: the model's own cap),
        like the runner's source rate limit, read when a query starts."""
        if not self.driver_up or self.resume_at is not None:
            return
        self.admission = admission
        self.stopping = (executors, partitions)
        self.restart_requested_at = self.t
        if executors > len(self.ready):  # new executors register while the batch finishes
            self.scale(executors)
        if self.batch is not None and self._gives_up_batch():
            self.taken -= self.batch.records  # read again by the resumed query
            self.batch = None
        if self.batch is None:
            self._begin_restart()

    def _gives_up_batch(self) -> bool:
        """Whether a restart stops the batch in flight instead of waiting for its commit: the
        runner's rule (operators/driver/gap.py), where the sink allows it. Batches that outlast
        the trigger run back to back and no gap comes, so it stops at once; shorter ones leave
        a gap after each, and it waits for it (here: for the commit, when the batch in flight
        ends within a trigger)."""
        b, m = self.batch, self.model
        if b is None or not m.restart_skips_batch:
            return False
        last = self.batches[-1] if self.batches else None
        overran = last is not None and last.end - last.start >= m.trigger_seconds
        return overran or b.end - self.t > m.trigger_seconds

    def kill_driver(self) -> None:
        """The driver dies: the batch in flight is lost and the executors go with it."""
        if not self.driver_up:
            return
        if self.batch is not None:
            self.taken -= self.batch.records
            self.batch = None
        self.driver_up = False
        self.failed_at = self.t
        self.stopping = None
        self.restart_requested_at = None
        self.last_restart_seconds = None  # a new runner remembers no restart
        self.resume_at = None
        self.restart_target = None
        self.target_before_failure = len(self.ready)
        self.ready = []
        self.holders = 0
        self.counters.failures.append(self.t)

    def recover(self, executors: int, partitions: int, admission: int | None = None) -> None:
        """Start a new driver from the checkpoint with ``executors`` and ``partitions``, its
        batches capped at ``admission`` records (None: the model's own cap)."""
        if self.driver_up:
            return
        self.admission = admission
        self.driver_up = True
        self.scale(executors)
        self._schedule_resume(executors, partitions)

    # --- time --------------------------------------------------------------------------------

    def advance(self, until: float) -> None:
        """Runs every event up to ``until`` (s), integrating cost and lag in between."""
        while self.t < until - EPS:
            nxt = min(until, self._next_event())
            self._integrate(nxt)
            self.t = nxt
            self._fire()

    def _next_event(self) -> float:
        cands = [math.inf]
        if self.batch is not None:
            cands.append(self.batch.end)
        elif not self.driver_up:
            if self.auto_recover and self.failed_at is not None:
                cands.append(self.failed_at + self.model.failure_restart_seconds)
        elif self.resume_at is not None:
            cands.append(self.resume_at)
        else:
            cands.append(max(self.next_start, self.t))
        return max(min(cands), self.t)

    def _fire(self) -> None:
        t = self.t
        if self.batch is not None:
            if self.batch.end <= t + EPS:
                self._commit()
            return
        if not self.driver_up:
            if (
                self.auto_recover
                and self.failed_at is not None
                and t >= self.failed_at + self.model.failure_restart_seconds - EPS
            ):
                self.recover(self.target_before_failure, self.partitions)
            return
        if self.resume_at is not None:
            if t >= self.resume_at - EPS:
                self._resume()
            return
        if t >= self.next_start - EPS:
            self._start_batch()

    def _integrate(self, t1: float) -> None:
        t0 = self.t
        if t1 <= t0:
            return
        self.counters.executor_seconds += len(self.ready) * (t1 - t0)
        if self.resume_at is not None or not self.driver_up:
            self.counters.downtime_seconds += t1 - t0
        if self.trace.arrived(t1) - self.processed > 1e-6:
            if t1 > self._oldest:
                lag = t1 - self._oldest
                self.counters.max_lag_seconds = max(self.counters.max_lag_seconds, lag)
            over = max(t0, self._oldest + self.slo)
            if t1 > over:
                self.counters.slo_violation_seconds += t1 - over

    def _start_batch(self) -> None:
        t, m = self.t, self.model
        available = self.arrived(t) - self.taken
        live = self.live(t)
        if available < 0.5 or live == 0:
            self.next_start = self._grid_after(t)
            if live == 0 and self.ready:
                self.next_start = max(self.next_start, min(self.ready))
            return
        caps = [c for c in (m.max_records_per_batch, self.admission) if c is not None]
        n = min([available, *caps])
        slots = live * m.cores_per_executor
        state_slots = min(self.holders, live) * m.cores_per_executor
        runs = []
        for s in m.stages:
            p = m.stage_partitions(s, self.partitions)
            usable = min(state_slots if s.kind == "stateful" else slots, p)
            if usable == 0:  # state holders gone: the next restart will spread state again
                usable = min(slots, p)
            busy = n * s.cost_per_record
            task = busy / p
            runs.append(
                StageRun(s.name, s.kind, p, usable, busy, math.ceil(p / usable) * task, task)
            )
        wall = m.overhead_seconds + sum(r.wall for r in runs)
        self.batch = Batch(len(self.batches), t, t + wall, n, m.overhead_seconds, tuple(runs))
        self.taken += n

    def _commit(self) -> None:
        b = self.batch
        assert b is not None
        self.batch = None
        self.processed += b.records
        self.batches.append(b)
        self.last_commit = self.t
        self._oldest = self.trace.arrival_time(self.processed)
        if self.stopping is not None:
            self._begin_restart()
        else:
            self.next_start = max(self.t, self._grid_after(b.start))

    def _grid_after(self, t: float) -> float:
        trig = self.model.trigger_seconds
        return (math.floor(t / trig + EPS) + 1) * trig

    def _begin_restart(self) -> None:
        assert self.stopping is not None
        executors, partitions = self.stopping
        self.stopping = None
        self.counters.restarts += 1
        self.scale(executors)
        self._schedule_resume(executors, partitions)

    def _schedule_resume(self, executors: int, partitions: int) -> None:
        changes = partitions != self.partitions
        if changes:
            self.counters.repartitions += 1
        down = self.model.repartition_seconds(self.processed, changes)
        self.resume_at = max([self.t + down, *self.ready])
        self.restart_target = (executors, partitions)

    def _resume(self) -> None:
        assert self.restart_target is not None
        _, partitions = self.restart_target
        self.partitions = partitions
        self.holders = self.live()
        self.resume_at = None
        self.restart_target = None
        self.failed_at = None
        if self.restart_requested_at is not None:
            self.last_restart_seconds = self.t - self.restart_requested_at
            self.restart_requested_at = None
        self.counters.resumed.append(self.t)
        self.next_start = self.t
