"""The closed loop: a simulated job, an autoscaler ticking on its interval, a timeline.

Our engine plugs in through :class:`EngineAutoscaler`, which runs the same
``controller.core.evaluate`` step as production and carries out a decision only when it
``acts`` (enforce mode, not hold).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from contracts.chaos import parse_chaos as contracts_parse_chaos
from contracts.history import ScalingHistory
from contracts.policy import ScalingPolicySpec
from contracts.trace import Trace
from controller.core import Action, evaluate
from controller.simulator.baselines import (
    Autoscaler,
    Command,
    Current,
    Observation,
    initial_executors,
)
from controller.simulator.job import SimulatedJob
from controller.simulator.model import JobModel
from controller.simulator.snapshots import EPOCH, Noise, build_snapshot, cpu_seconds


def parse_chaos(spec: str | None) -> list[float]:
    """Driver-failure times (s) from a ``--chaos`` spec: the simulator models only
    ``kill-driver`` (contracts.chaos says the format and names a wrong part)."""
    return [e.at for e in contracts_parse_chaos(spec, kinds=("kill-driver",))]


@dataclass
class EngineAutoscaler:
    """``controller.core.evaluate`` on the simulated job's snapshot, with its durable history."""

    policy: ScalingPolicySpec
    name: str = "engine"
    auto_recover: bool = False
    history: ScalingHistory = field(default_factory=ScalingHistory)
    last_reason: str = ""

    @property
    def interval(self) -> float:
        return self.policy.timing.evaluation_interval_seconds

    @property
    def window(self) -> float:
        return self.policy.timing.window_seconds

    def tick(self, obs: Observation, now: float, cur: Current) -> Command | None:
        ev = evaluate(lambda _window, _now: obs.snapshot, self.policy, self.history, EPOCH + now)
        d = ev.decision
        if d.acts:
            ev = ev.carried_out()  # run() applies the command; a simulated job never refuses
        self.history = ev.history
        self.last_reason = d.reason.value
        if not d.acts:
            return None
        executors = d.target_executors if d.target_executors is not None else cur.executors
        parts = d.target_partitions if d.target_partitions is not None else cur.partitions
        kind = {Action.SCALE: "scale", Action.REPARTITION: "restart", Action.RECOVER: "recover"}
        return Command(
            kind[d.action],  # type: ignore[arg-type]
            executors,
            parts,
            reason=d.reason.value,
            max_records_per_batch=d.max_records_per_batch,
        )


@dataclass(frozen=True)
class Sample:
    """One timeline row (every ``sample_seconds``)."""

    t: float
    input_rate: float
    processed_rate: float
    backlog_records: float
    lag_seconds: float
    executors: int
    executors_requested: int
    partitions: int
    driver_up: bool
    state_bytes: float
    action: str = ""
    reason: str = ""


@dataclass
class RunResult:
    """Everything a report needs about one run."""

    name: str
    job: SimulatedJob
    samples: list[Sample]
    commands: list[tuple[float, Command]]
    duration: float
    conservation_error: float


def run(
    trace: Trace,
    model: JobModel,
    policy: ScalingPolicySpec,
    autoscaler: Autoscaler,
    *,
    duration: float | None = None,
    chaos: list[float] | None = None,
    start: tuple[int, int] | None = None,
    sample_seconds: float = 1.0,
) -> RunResult:
    """Runs ``autoscaler`` against the model for ``duration`` seconds (default: the trace's)."""
    horizon = duration or trace.duration
    n0, p0 = start or (initial_executors(model, policy), model.state_partitions)
    job = SimulatedJob(
        model,
        trace,
        executors=n0,
        state_partitions=p0,
        slo_seconds=policy.lag.slo_seconds,
        auto_recover=autoscaler.auto_recover,
    )
    noise = Noise(model.noise, model.seed)
    cur = Current(n0, p0)
    kills = list(chaos or [])
    samples: list[Sample] = []
    commands: list[tuple[float, Command]] = []
    next_tick = autoscaler.interval
    next_sample = 0.0
    last_processed = 0.0
    worst = 0.0
    action, reason = "", ""
    while True:
        t = min(next_tick, next_sample, kills[0] if kills else math.inf)
        if t > horizon + 1e-9:
            break
        job.advance(t)
        worst = max(worst, job.conservation_error())
        if kills and kills[0] <= t + 1e-9:
            kills.pop(0)
            job.kill_driver()
            action, reason = "kill-driver", "Chaos"
        if next_tick <= t + 1e-9:
            next_tick += autoscaler.interval
            w = autoscaler.window
            snap = build_snapshot(job, t, w, noise)
            cpu = noise(cpu_seconds(job, t - w, t)) if job.live() else None
            cmd = autoscaler.tick(Observation(snap, cpu), t, cur)
            if cmd is not None:
                cur = _apply(job, cmd, cur)
                commands.append((t, cmd))
                action, reason = cmd.action, cmd.reason
            elif not action:
                action, reason = "hold", getattr(autoscaler, "last_reason", "")
        if next_sample <= t + 1e-9:
            next_sample += sample_seconds
            rate = (job.processed - last_processed) / sample_seconds if t > 0 else 0.0
            last_processed = job.processed
            samples.append(
                Sample(
                    t,
                    job.trace.rate_at(t),
                    rate,
                    job.backlog,
                    job.lag(),
                    job.live(),
                    job.requested,
                    job.partitions,
                    job.driver_up,
                    job.state_bytes,
                    action,
                    reason,
                )
            )
            action, reason = "", ""
    job.advance(horizon)
    return RunResult(autoscaler.name, job, samples, commands, horizon, worst)


def _apply(job: SimulatedJob, cmd: Command, cur: Current) -> Current:
    parts = cmd.partitions if cmd.partitions is not None else cur.partitions
    if cmd.action == "scale":
        job.scale(cmd.executors)
        return Current(cmd.executors, cur.partitions)
    if cmd.action == "restart":
        job.restart(cmd.executors, parts, cmd.max_records_per_batch)
    else:
        job.recover(cmd.executors, parts, cmd.max_records_per_batch)
    return Current(cmd.executors, parts)
