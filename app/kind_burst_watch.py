"""What `make kind-burst` watches (app/kind_burst.py): kubectl against the kind cluster, the
timeline sampler (the runner's own /metrics, the StreamJob's status, the pods) and the actions
with their reasons; the failures it causes on request are app/kind_burst_failures.py."""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import yaml

from app.demo_report import Row
from app.errors import KindBurstError
from app.kind_burst_job import JOB, NAMESPACE
from contracts import metric_names as M
from contracts.history import ScalingHistory
from contracts.runner_api import CONTROL_PORT, TOKEN_ENV, RunnerStatus
from controller.adapters.promql import Window
from controller.adapters.scrape import ScrapeSource, parse_exposition

WINDOW = Window(16.0)
"""The policy's window: the lag and rates the report reads from the runner's own /metrics."""


@dataclass
class Kubectl:
    context: str
    binary: str = "kubectl"

    def run(self, *args: str, stdin: str | None = None, check: bool = True) -> str:
        out = subprocess.run(
            [self.binary, "--context", self.context, *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=300,
        )
        if check and out.returncode != 0:
            raise KindBurstError(f"kubectl {' '.join(args)}: {out.stderr.strip()[-800:]}")
        return out.stdout

    def json(self, *args: str) -> Any:
        return json.loads(self.run(*args, "-o", "json"))

    def raw(self, path: str) -> tuple[int, str]:
        """GET ``path`` on the API server (its service proxy reaches pods the host cannot)."""
        out = subprocess.run(
            [self.binary, "--context", self.context, "get", "--raw", path],
            capture_output=True, text=True, timeout=10,
        )  # fmt: skip
        return (200, out.stdout) if out.returncode == 0 else (502, out.stderr.strip()[-300:])

    def apply(self, docs: list[dict[str, Any]]) -> None:
        self.run(
            "apply",
            "--server-side",
            "--field-manager=kind-burst",
            "-f",
            "-",
            stdin=yaml.safe_dump_all(docs),
        )


@dataclass
class Sampler:
    """Every sample, a timeline row: the lag, backlog and processed rate from the runner's own
    ``/metrics`` (through the API server's service proxy, evaluated as the controller's scrape
    fallback evaluates them), so the report sees the job even when the controller does not (its
    status keeps the last values it saw); executors from the pods; the phase and targets from the
    StreamJob's status. A sample whose metrics cannot be read has no lag and counts as
    unobserved, never as within the SLO."""

    kubectl: Kubectl
    t0: float = field(default_factory=time.time)
    scrape: ScrapeSource | None = None
    unobserved_seconds: float = 0.0
    rows: list[Row] = field(default_factory=list)
    nodes: dict[str, set[str]] = field(default_factory=lambda: {"driver": set(), "executor": set()})
    peak_executors: int = 0
    pods: list[dict[str, Any]] = field(default_factory=list)
    """The job's pods at the last sample."""
    failed_tasks: list[tuple[float, float]] = field(default_factory=list)
    """(run's clock, the driver's failed-task count) per sample whose metrics were read; the
    count starts again at 0 with a new driver."""

    def _fetch(self, path: str) -> tuple[int, str]:
        code, text = self.kubectl.raw(path)
        if code == 200:
            with contextlib.suppress(ValueError):  # the scrape itself says it did not parse
                self.failed_tasks.append((round(time.time() - self.t0, 1), failed_tasks(text)))
        return code, text

    def sample(self) -> dict[str, Any] | None:
        job = self.kubectl.json("get", "streamjob", JOB, "-n", NAMESPACE)
        pods = self.kubectl.json("get", "pods", "-n", NAMESPACE, "-l", "spark-role")["items"]
        self.pods = pods
        running = 0
        for p in pods:
            role = p["metadata"]["labels"].get("spark-role", "")
            node = p["spec"].get("nodeName")
            if node and role in self.nodes:
                self.nodes[role].add(node)
            if (
                role == "executor"
                and p["status"].get("phase") == "Running"
                and not p["metadata"].get("deletionTimestamp")
            ):
                running += 1
        self.peak_executors = max(self.peak_executors, running)
        st = job.get("status") or {}
        ex = st.get("executors") or {}
        if self.scrape is None:
            path = f"/api/v1/namespaces/{NAMESPACE}/services/{JOB}-driver-svc:9108/proxy/metrics"
            self.scrape = ScrapeSource(lambda _job: path, fetch=self._fetch)
        snap = self.scrape.snapshot(JOB, WINDOW, now=time.time())
        if snap.backlog_age_seconds is None and self.rows:
            self.unobserved_seconds += time.time() - self.t0 - self.rows[-1].t
        self.rows.append(
            Row(
                t=round(time.time() - self.t0, 1),
                input_rate=snap.arrival_rate,
                processed_rate=snap.processed_rate,
                backlog_records=snap.backlog_records,
                lag_seconds=snap.backlog_age_seconds,
                executors=running,
                executors_target=ex.get("target"),
                partitions=st.get("partitions"),
                phase=str(st.get("phase") or ""),
            )
        )
        return dict(st)


def actions_of(
    status: dict[str, Any], events: list[dict[str, Any]], t0: float
) -> list[dict[str, Any]]:
    """The actions the controller recorded in the StreamJob's history, on the run's clock, each
    with its reason, its target and the message of the Event the controller emitted for it (the
    Event of that reason nearest in time)."""
    history = ScalingHistory.model_validate(status.get("history") or {})
    out = []
    for e in history.entries:
        if e.kind != "action":
            continue
        same = [ev for ev in events if ev["reason"] == e.reason]
        near = min(same, key=lambda ev: abs(ev["time"] - e.time), default=None)
        out.append(
            {
                "t": round(e.time - t0, 1),
                "action": e.action,
                "reason": e.reason,
                "executors_before": e.executors_before,
                "executors": e.executors,
                "partitions": e.partitions,
                "backlog_age_seconds": e.backlog_age_seconds,
                "message": near["message"] if near else None,
            }
        )
    return out


def action_line(a: dict[str, Any]) -> str:
    """``75 s repartition 1->4 executors, 4 partitions: RepartitionStateBound``."""
    parts = "" if a["partitions"] is None else f", {a['partitions']} partitions"
    moved = f"{a['executors_before']}->{a['executors']} executors{parts}"
    return f"{a['t']:.0f} s {a['action']} {moved}: {a['reason']}"


def job_events(kubectl: Kubectl) -> list[dict[str, Any]]:
    """The StreamJob's Events (reason, message, Unix time of the last occurrence)."""
    items = kubectl.json(
        "get", "events", "-n", NAMESPACE, "--field-selector",
        f"involvedObject.kind=StreamJob,involvedObject.name={JOB}",
    )["items"]  # fmt: skip
    out = []
    for ev in items:
        stamp = (
            ev.get("lastTimestamp") or ev.get("eventTime") or ev["metadata"]["creationTimestamp"]
        )
        when = datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
        out.append({"reason": ev.get("reason"), "message": ev.get("message"), "time": when})
    return out


def failed_tasks(metrics: str) -> float:
    """The runner's failed-task count in its ``/metrics`` text, read by the controller's own
    exposition parser (0 before the first failure: the series appears with it). Raises
    ``ValueError`` when the text does not parse."""
    return sum(parse_exposition(metrics, JOB).get(M.FAILED_TASKS.total, {}).values())


STATUS_IN_POD = (
    "import os, urllib.request as u\n"
    f"r = u.Request('http://127.0.0.1:{CONTROL_PORT}/status', headers={{'Authorization': "
    f"'Bearer ' + os.environ['{TOKEN_ENV}']}})\n"
    "print(u.urlopen(r, timeout=10).read().decode())\n"
)
"""Run in the driver container: its own ``/status`` with the token the pod already holds (the
host reaches no pod address on kind, and the API server's proxy would not pass the token on)."""


def runner_status(kubectl: Kubectl, pods: list[dict[str, Any]]) -> RunnerStatus | None:
    """The running driver's ``/status`` (its actions with their results), or None when no driver
    runs or it does not answer."""
    driver = next((p for p in pods if p["metadata"]["labels"].get("spark-role") == "driver"
                   and p["status"].get("phase") == "Running"
                   and not p["metadata"].get("deletionTimestamp")), None)
    if driver is None:
        return None
    try:
        out = kubectl.run("exec", "--request-timeout=20s", driver["metadata"]["name"], "-n",
                          NAMESPACE, "--", "python3", "-c", STATUS_IN_POD)
        return RunnerStatus.model_validate_json(out)
    except (KindBurstError, ValueError, subprocess.TimeoutExpired):
        return None


RECORD_WAIT_SECONDS = 90.0
"""How long after a scale-in's decision its runner record is looked for."""


@dataclass
class ScaleIns:
    """Each scale-in the controller recorded (a ``ScaleIn`` action in the StreamJob's history),
    as the runner carried it out: the runner's record of it (read from the driver that did it,
    once the action is done: a later driver knows nothing of it), its ``graceful`` result
    (``batch-boundary``: the executors went between two batches) and the tasks that failed
    from the sample before it to the one after (the driver's count)."""

    kubectl: Kubectl
    done: list[dict[str, Any]] = field(default_factory=list)
    pending: dict[float, float] = field(default_factory=dict)
    """History time of each scale-in whose runner record is not read yet -> when it was seen
    (monotonic)."""

    def step(self, sampler: Sampler, status: dict[str, Any]) -> None:
        history = ScalingHistory.model_validate(status.get("history") or {})
        known = set(self.pending) | {d["history_time"] for d in self.done}
        now = time.monotonic()
        for e in history.entries:
            if e.kind == "action" and e.reason == "ScaleIn" and e.time not in known:
                self.pending[e.time] = now
        for when in [w for w, seen in self.pending.items() if now - seen > RECORD_WAIT_SECONDS]:
            # its driver is gone (a recovery came between) or never answered: said, not hidden
            self.done.append({"history_time": when, "at_s": round(when - sampler.t0, 1),
                              "state": None, "unread": "no runner record within "
                              f"{RECORD_WAIT_SECONDS:.0f} s"})
            del self.pending[when]
        if not self.pending or status.get("intent") is not None:
            return
        runner = runner_status(self.kubectl, sampler.pods)
        if runner is None:
            return
        for when in list(self.pending):
            record = next((a for a in reversed(runner.recent_actions)
                           if str(a.kind) == "executors" and a.result.get("killed")
                           and a.finished_at is not None and a.started_at >= when - 5.0), None)
            if record is None:
                continue
            t = round(when - sampler.t0, 1)
            before = [v for at, v in sampler.failed_tasks if at <= t]
            latest = sampler.failed_tasks[-1][1] if sampler.failed_tasks else None
            self.done.append({
                "history_time": when,
                "at_s": t,
                "action_id": record.id,
                "state": str(record.state),
                "killed": record.result.get("killed"),
                "graceful": record.result.get("graceful"),
                "steps": record.steps,
                "failed_tasks": (None if not before or latest is None
                                 else max(0.0, latest - before[-1])),
            })
            del self.pending[when]

    def after(self, t: float) -> bool:
        """A scale-in recorded and read later than ``t`` on the run's clock."""
        return any(d["at_s"] > t for d in self.done)


def rpc_secret_in_env(pods: list[dict[str, Any]]) -> list[str]:
    """Pods carrying Spark's RPC secret as an environment value, which whoever may list the
    namespace's pods reads (executors read it from their job's Secret as a file:
    controller/kube/resources.py SPARK_AUTH_DIR)."""
    return sorted(p["metadata"]["name"] for p in pods for c in p["spec"]["containers"]
                  if any(e["name"] == "_SPARK_AUTH_SECRET" and "value" in e
                         for e in c.get("env", [])))
