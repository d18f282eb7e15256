"""What `make kind-burst` watches (app/kind_burst.py): kubectl against the kind cluster, the
timeline sampler (the runner's own /metrics, the StreamJob's status, the pods) and the actions
with their reasons; the failures it causes on request are app/kind_burst_failures.py."""

from __future__ import annotations

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
from contracts.history import ScalingHistory
from controller.adapters.promql import Window
from controller.adapters.scrape import ScrapeSource

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
            self.scrape = ScrapeSource(lambda _job: path, fetch=self.kubectl.raw)
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
