"""``stream-autoscaler demo``: the embedded closed loop on one machine.

Real Spark (a standalone mini-cluster on loopback), the burst source replaying a trace, a real
Prometheus scraping the runner, and the controller (the same pure engine as in Kubernetes)
acting through the runner's control endpoint. Chaos (``kill-driver@T``, ``kill-executor@T``,
``kill-prometheus@T``) is injected on schedule; a dead driver is recovered as a scale-out from the
latest checkpoint. At the end: the exactly-once verdict, summary.json, timeline.csv/png and an
HTML report in ``--out``.
"""

from __future__ import annotations

import json
import math
import os
import secrets
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import structlog

from app import demo_report as report
from app.calibrate import load_unit_rate
from app.demo_job import verify_exactly_once, write_run_job
from app.errors import DemoError
from contracts.chaos import ChaosError, parse_chaos
from contracts.manifests import load_job
from contracts.ports import free_port
from contracts.runner_api import ActionState, RunnerStatus
from contracts.sources import BurstSource
from contracts.trace import load_trace
from controller.adapters.prometheus import PrometheusSource
from controller.core import Action, Decision, Evaluation
from controller.local.loop import LocalController, PolicyFile
from controller.local.processes import RunnerProcess, executor_pids, kill_pid
from controller.local.prometheus_server import PrometheusServer
from operators.query.cgroups import CpuQuota, CpuQuotaError
from operators.sources.burst_clock import BurstClock

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_JOB = ROOT / "k8s" / "samples" / "pseudonymized-wordcount.yaml"
POLICIES = ROOT / "policies"
DEFAULT_POLICY = POLICIES / "default.yaml"
DEFAULT_TRACE = ROOT / "traces" / "demo.csv"
PROMETHEUS_OUTAGE_SECONDS = 30.0
"""How long a kill-prometheus outage lasts before the demo restarts it."""
DRIVER_RESERVE_CORES = 0.5
"""Cores kept out of the executors' budget for the driver, the source, Prometheus and the
controller, which run uncapped beside capped executors (2 cores, 0.25 each -> 6 executors)."""

log = structlog.get_logger("stream_autoscaler.demo")


@dataclass
class RunnerActuator:
    """Carries decisions out through the runner; recovery starts a new runner."""

    runner: RunnerProcess
    actions: list[dict[str, Any]] = field(default_factory=list)
    t0: float = 0.0
    recovered_at: list[float] = field(default_factory=list)
    acting: tuple[float, Decision] | None = None
    """The decision being carried out now and when it started (demo seconds), for the live
    line: an evaluation is only reported once its action is over."""

    def apply(self, d: Decision) -> None:
        record: dict[str, Any] = {
            "t": round(time.time() - self.t0, 1),
            "action": d.action.value,
            "reason": d.reason.value,
            "executors": d.target_executors,
            "partitions": d.target_partitions,
            "predicted_rate": d.sizing.target_capacity_rate,
        }
        self.acting = (record["t"], d)
        steps: dict[str, float] = {}
        try:
            self._carry_out(d, steps)
        finally:
            self.acting = None
        record["t_end"] = round(time.time() - self.t0, 1)  # the runner idle again (or restarted)
        record["steps"] = {k: round(v, 2) for k, v in steps.items()}
        self.actions.append(record)

    def _carry_out(self, d: Decision, steps: dict[str, float]) -> None:
        """Carry ``d`` out; ``steps`` gets the seconds of each of the runner's steps for it
        (contracts.runner_api.Step; a recovery's are the new runner's start)."""
        if d.action is Action.RECOVER:
            self._recover(d)
            _add_steps(steps, self.runner.client.status().start_steps)
        else:
            client = self.runner.client
            if d.target_executors is not None:
                client.set_executors(d.target_executors)
                done = client.wait_idle()
                _add_steps(steps, done.steps if done is not None else {})
            if d.action is Action.REPARTITION and d.target_partitions is not None:
                client.repartition(d.target_partitions,
                                   max_records_per_batch=d.max_records_per_batch)
                last = client.wait_idle()
                if last is not None and last.state == ActionState.FAILED:
                    raise RuntimeError(f"repartition failed: {last.error}")
                _add_steps(steps, last.steps if last is not None else {})

    def _recover(self, d: Decision) -> None:
        self.runner.kill()  # whatever is left of the old driver
        # more state partitions: the runner finishes the batch the old driver left in flight,
        # then repartitions, before its query starts (an offline rewrite refuses that batch)
        self.runner.start(executors=d.target_executors, state_partitions=d.target_partitions,
                          max_records_per_batch=d.max_records_per_batch)
        self.recovered_at.append(time.time() - self.t0)


def _add_steps(into: dict[str, float], steps: dict[str, float]) -> None:
    for k, v in steps.items():
        into[k] = into.get(k, 0.0) + v


@dataclass(frozen=True)
class ExecutorCap:
    """How many executors this machine carries, and why (printed at the start)."""

    executors: int
    message: str


def policy_for(job_path: Path) -> Path:
    """The policy the job names (``spec.policyRef.name``) among the bundled ``policies/``, as
    the controller in a cluster would resolve it; the default policy when none is bundled."""
    named = POLICIES / f"{load_job(job_path).spec.policy_ref.name}.yaml"
    return named if named.is_file() else DEFAULT_POLICY


def executors_that_fit(cpus: float, cores: int) -> int:
    """Executors of ``cpus`` cores each that ``cores`` carry beside the driver (at least 1)."""
    return max(1, math.floor((cores - DRIVER_RESERVE_CORES) / cpus + 1e-9))


def executor_budget(
    cpus: float | None, cores: int | None = None
) -> tuple[float | None, ExecutorCap]:
    """The executors' CPU quota that can really be set here, and the executors that fit.

    With a quota ``q``: ``floor((cores - DRIVER_RESERVE_CORES) / q)`` executors (at least 1). If
    cgroups cannot be written (not root, no cpu controller), the executors run on whole cores
    and the message says why. Without a quota: one executor per core, as before.
    """
    cores = cores or os.cpu_count() or 1
    why = ""
    if cpus is not None:
        try:
            CpuQuota.create(f"probe-{os.getpid()}", cpus).remove()
        except CpuQuotaError as e:
            why, cpus = f" (no CPU quota: {e})", None
    if cpus is None:
        return None, ExecutorCap(
            cores, f"executors on whole cores: executors.max capped at the {cores} cores{why}"
        )
    n = executors_that_fit(cpus, cores)
    return cpus, ExecutorCap(
        n,
        f"executors capped at {cpus:g} cores each (a CFS quota, as a pod's CPU limit): "
        f"executors.max capped at {n} ({cores} cores, {DRIVER_RESERVE_CORES:g} kept for the "
        "driver, the source, Prometheus and the controller)",
    )


def run_demo(
    job_path: Path,
    policy_path: Path,
    trace_path: Path,
    out: Path,
    duration: float | None,
    chaos: str | None,
    static_executors: int | None = None,
    executor_cpus: float | Literal["job"] | None = "job",
) -> dict[str, Any]:
    """Runs the closed loop; returns the summary (also written to ``out/summary.json``).

    With ``static_executors`` it is the static baseline: that many executors and state
    partitions from the start, and the controller only recommends (it never acts).
    ``executor_cpus`` caps each executor with a CFS quota ("job": the StreamJob's
    ``executors.cpuLimit``/``cpu``, as its pods would get; None: whole cores).
    """
    from operators.query.cluster import MiniCluster

    try:
        events = [(e.at, e.kind) for e in parse_chaos(chaos)]
    except ChaosError as e:
        raise DemoError(str(e)) from None
    job = load_job(job_path)
    cpus = job.spec.executors.cpu_limit_cores() if executor_cpus == "job" else executor_cpus
    cpus, cap = executor_budget(cpus)
    _say(cap.message)
    policy_file = PolicyFile(
        policy_path, recommend_only=static_executors is not None, max_executors=cap.executors
    )
    policy = policy_file.policy
    trace = load_trace(str(trace_path))
    run_for = duration or trace.duration
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    _log_to(out / "controller.log")

    # Executors beyond what the machine's cores carry only contend for them: the policy's
    # executors.max is capped (executor_budget; the decisions then say AtMaxCapacity).
    max_executors = max(policy.executors.max, static_executors or 0)
    cluster = MiniCluster(
        workers=max_executors,
        cores_per_worker=job.spec.executors.cores,
        memory_per_worker="1g",
        log_dir=out / "cluster",
        executor_cpus=cpus,
    )
    started = time.monotonic()
    _say(f"starting a Spark mini-cluster: {max_executors} workers on loopback")
    cluster.start()
    _say(f"mini-cluster up in {time.monotonic() - started:.0f} s")
    prom: PrometheusServer | None = None
    runner: RunnerProcess | None = None
    controller: LocalController | None = None
    try:
        unit = None
        if trace.unit == "load":
            unit = load_unit_rate(job, cluster.master_url, out / "calibration", cpus, _say)
            one = "one executor" + (f" ({cpus:g} cores)" if cpus else "")
            _say(f"{one} of {job.metadata.name} sustains {unit:,.0f} records/s (load 1)")
        job_file = write_run_job(
            job, trace_path, unit, out, static_executors or policy.executors.initial,
            partitions=static_executors,
        )  # fmt: skip
        spec = load_job(job_file).spec
        token_file = out / "runner.token"
        token_file.write_text(secrets.token_urlsafe(24), encoding="utf-8")
        runner = RunnerProcess(
            job_file=job_file,
            master=cluster.master_url,
            workdir=out,
            control_port=free_port(),
            metrics_port=free_port(),
            executors=spec.executors.initial,
            max_executors=max_executors,
            token_file=token_file,
        )
        prom = PrometheusServer(
            out / "prometheus", {job.metadata.name: f"127.0.0.1:{runner.metrics_port}"}
        ).start()
        _say(f"Prometheus on {prom.url}; starting the runner")
        runner.start()
        t0 = time.time()
        actuator = RunnerActuator(runner, t0=t0)
        marks: dict[int, Evaluation] = {}
        controller = LocalController(
            job.metadata.name,
            policy_file,
            PrometheusSource(prom.url),
            actuator,
            on_evaluation=lambda ev: marks.__setitem__(round(ev.time - t0), ev),
        )
        controller.start()
        rows, chaos_log = _record(runner, prom, cluster, marks, actuator, events, t0, run_for)
        controller.stop()
        _mark_actions(rows, actuator.actions)
        _say("stopping the job at a batch boundary")
        runner.stop()
        verdict = verify_exactly_once(spec)
        summary = report.summarize(rows, policy_file.policy.lag.slo_seconds, actuator.actions)
        summary.update(_recovery_figures(rows, chaos_log, policy_file.policy.lag))
        summary.update(verdict)
        summary["chaos"] = chaos_log
        summary["policy_reloads"] = policy_file.reloads
        summary["policy_rejected"] = policy_file.last_error
        summary["load_unit_rate"] = unit
        pol = policy_file.policy
        summary["scale_out_predictions"] = report.prediction_errors(
            rows, actuator.actions, pol.utilization.target, pol.lag.backlog_tolerance_seconds
        )
        decisions = [
            {"t": round(ev.time - t0, 1), "reason": ev.decision.reason.value,
             "message": ev.decision.message, "acted": ev.acted, "error": ev.error}
            for ev in sorted(marks.values(), key=lambda e: e.time)
        ]  # fmt: skip
        report.write_timeline(out / "timeline.csv", rows)
        report.plot(out / "timeline.png", rows, policy.lag.slo_seconds, f"demo: {trace_path.name}",
                    actuator.actions)  # fmt: skip
        (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
        (out / "decisions.json").write_text(json.dumps(decisions, indent=1), encoding="utf-8")
        acted = [d for d in decisions if d["acted"]]
        report.write_html(out / "report.html", summary, out / "timeline.png", acted,
                          actuator.actions)  # fmt: skip
        return summary
    finally:
        if controller is not None:
            controller.stop()
        if runner is not None and runner.alive():
            runner.kill()
        if prom is not None:
            prom.stop()
        cluster.stop()


def _record(
    runner: RunnerProcess,
    prom: PrometheusServer,
    cluster: Any,
    marks: dict[int, Evaluation],
    actuator: RunnerActuator,
    events: list[tuple[float, str]],
    t0: float,
    run_for: float,
) -> tuple[list[report.Row], list[dict[str, Any]]]:
    """One timeline row a second, chaos on schedule, a live line every few seconds."""
    rows: list[report.Row] = []
    chaos_log: list[dict[str, Any]] = []
    pending = list(events)
    prom_back_at: float | None = None
    last = RunnerStatus()
    run = load_job(runner.job_file).spec  # the run's manifest, as the runner reads it
    trace = report.source_trace(run.source)
    clock = BurstClock.for_source(run.source) if isinstance(run.source, BurstSource) else None
    lead: float | None = None  # trace time - t, once the source's run start is on disk
    filled = 0
    while (t := time.time() - t0) < run_for:
        while pending and pending[0][0] <= t:
            _, kind = pending.pop(0)
            chaos_log.append(_inject(kind, runner, prom, cluster, t, last))
            if kind == "kill-prometheus":
                prom_back_at = t + PROMETHEUS_OUTAGE_SECONDS
        if prom_back_at is not None and t >= prom_back_at:
            prom.start()
            prom_back_at = None
            chaos_log.append({"t": round(t, 1), "event": "prometheus-restarted"})
        try:
            last = runner.client.status()
            phase = str(last.phase)
        except Exception:
            phase = "Down"
        ev = marks.get(round(t))
        rates, backlog, ex = last.rates, last.backlog, last.executors
        records, lag = backlog.records, backlog.age_seconds
        # stopped, no batch reports progress: what waits behind the last commit, not the
        # last batch's figures, which would hide the downtime's lag
        waiting = report.backlog_while_stopped(phase, run.checkpoint.location, clock, time.time())
        if waiting is not None:
            records, lag = float(waiting.records), waiting.age_seconds
        up = phase != "Down"  # a dead driver reports no rates: a gap, not its last batch's
        rows.append(
            report.Row(
                t=round(t, 1),
                input_rate=rates.arrival_rows_per_second if up else None,
                # a stopped query (repartition) processes nothing: no flat last-batch line
                processed_rate=rates.processed_rows_per_second
                if up and phase != "Repartitioning"
                else None,
                backlog_records=records,
                lag_seconds=lag,
                executors=int(ex.live or 0) if up else 0,
                executors_target=ex.target,
                partitions=last.partitions,
                phase=phase,
                reason=ev.decision.reason.value if ev else "",
            )
        )
        if lead is None:
            lead = report.trace_lead(run.checkpoint.location, t0)
        if lead is not None and trace is not None:
            report.fill_arrivals(rows[filled:], trace, lead)
            filled = len(rows)
        if len(rows) % 5 == 1:
            _live(rows[-1], marks, t0, actuator)
        time.sleep(max(0.0, 1.0 - ((time.time() - t0) - t)))
    return rows, chaos_log


def _mark_actions(rows: list[report.Row], actions: list[dict[str, Any]]) -> None:
    """Puts each action on the timeline row of the second it started."""
    for a in actions:
        row = min(rows, key=lambda r: abs(r.t - a["t"]), default=None)
        if row is not None:
            row.action, row.reason = a["action"], a["reason"]


def _inject(
    kind: str,
    runner: RunnerProcess,
    prom: PrometheusServer,
    cluster: Any,
    t: float,
    status: RunnerStatus,
) -> dict[str, Any]:
    event: dict[str, Any] = {"t": round(t, 1), "event": kind}
    if kind == "kill-driver":
        event["last_committed_batch"] = status.last_committed_batch
        runner.kill()
    elif kind == "kill-prometheus":
        prom.kill()
    else:
        workers = [p.popen.pid for p in cluster._procs if p.name.startswith("worker")]
        pids = executor_pids(workers)
        if pids:
            kill_pid(pids[-1])
            event["pid"] = pids[-1]
        else:
            event["error"] = "no executor to kill"
    _say(f"CHAOS t={t:.0f}s: {kind}")
    log.warning("chaos", chaos=event)
    return event


def _recovery_figures(
    rows: list[report.Row], chaos: list[dict[str, Any]], lag: Any
) -> dict[str, Any]:
    """kill -> first committed batch, and kill -> backlog drained, for each driver kill."""
    figures: dict[str, Any] = {}
    for ev in chaos:
        if ev["event"] != "kill-driver":
            continue
        after = [r for r in rows if r.t > ev["t"]]
        up = next((r for r in after if r.phase not in ("Down", "Starting")), None)
        drained = None
        if up is not None:
            drained = next(
                (
                    r
                    for r in after
                    if r.t >= up.t and (r.lag_seconds or 0) <= lag.backlog_tolerance_seconds
                ),
                None,
            )
        figures["recovery_seconds"] = round(up.t - ev["t"], 1) if up else None
        figures["drain_seconds"] = round(drained.t - ev["t"], 1) if drained else None
    return figures


def _live(
    row: report.Row, marks: dict[int, Evaluation], t0: float, actuator: RunnerActuator
) -> None:
    # The controller's thread adds evaluations as they finish: read a copy.
    line = report.live_line(row, tuple(marks.values()), t0, actuator.acting)
    print(line, flush=True)


def _say(text: str) -> None:
    print(f"demo: {text}", flush=True)


def _log_to(path: Path) -> None:
    """Structured JSON logs (structlog) to a file; the terminal gets the live view."""
    logfile = path.open("a", encoding="utf-8")
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso"),
            structlog.processors.JSONRenderer(),
        ],
        logger_factory=structlog.WriteLoggerFactory(file=logfile),
        cache_logger_on_first_use=False,
    )
