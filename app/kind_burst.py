"""``make kind-burst``: a burst StreamJob on a kind cluster of several nodes, watched and reported.

What it does, on the cluster ``hack/kind/up.sh`` made (the chart installed, the image loaded):

1. the checkpoint volume: a ReadWriteMany PersistentVolume over the host directory every worker
   mounts (``KIND_SHARED_DIR``, hack/kind/lib.sh), bound to the claim the sample jobs name — so a
   driver or an executor on any worker reads and writes the same checkpoint, and it outlives any
   node;
2. a ScalingPolicy and a burst StreamJob (a keyed count, a files sink on the volume, CPU-limited
   executors so that scaling shows on a small machine);
3. ``kubectl get streamjobs --watch`` printed live while the burst runs; every
   :data:`SAMPLE_SECONDS` the runner's own ``/metrics`` (through the API server's service proxy),
   the StreamJob's status and the job's pods are sampled (:class:`Sampler`);
4. once the trace has played and the job has caught up, the StreamJob is deleted (the runner stops
   at a batch boundary) and the verifier reads the volume's directory on the host: every record
   the checkpoint committed counted exactly once;
5. ``out/kind-burst/``: ``summary.json`` (``exactly_once``, ``nodes``, ``peak_executors``,
   ``actions``, ``slo_violation_seconds``, ...), ``timeline.csv`` and ``timeline.png`` (the demo's
   plot: rates, lag against the SLO, executors and partitions, each action with its reason),
   ``actions.json`` (each decision the controller recorded, with its reason and message).

With ``--lose-worker`` (:class:`NodeLoss`) the worker holding executors and not the driver is
paused once a scale-out has spread them, and the summary's ``node_loss`` says when the node was
seen NotReady, when as many executors ran again and when the lag was back under the SLO.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import structlog
import yaml

from app.demo_report import Row, fill_arrivals, plot, summarize, trace_lead, write_timeline
from app.errors import AppError
from contracts.history import ScalingHistory
from contracts.trace import load_trace
from controller.adapters.promql import Window
from controller.adapters.scrape import ScrapeSource

JOB = "kind-burst"
POLICY = "kind-burst"
CLAIM = "stream-autoscaler-checkpoints"
NAMESPACE = "default"
SHARED_PATH = "/var/lib/stream-autoscaler/shared"
"""Where every worker mounts the shared host directory (hack/kind/lib.sh KIND_SHARED_PATH)."""
RUNNER_UID = 10001
"""The image's user (the chart's podSecurityContext): it must write the host directory."""

TRACE = "t,input_rate\n0,1500\n20,40000\n110,400\n180,12000\n260,400\n330,0\n100000,0\n"
"""Records/s by second since the query started: a burst that one 0.5-CPU executor cannot keep up
with (~30,000 records/s on this machine's fastest day), a lull long enough for a scale-in (the
policy's 30 s stabilization and 16 s cooldown), a smaller burst, then quiet."""

TRACE_SECONDS = 330.0
"""When the trace stops delivering records."""

SAMPLE_SECONDS = 2.0
CAUGHT_UP_LAG_SECONDS = 6.0
"""A backlog no older than three 2 s triggers is caught up."""

MAX_WAIT_SECONDS = 1200.0
"""The whole run's bound: the trace, the start of the job, slow days."""

SLO_SECONDS = 20.0
WINDOW = Window(16.0)
"""The policy's window: the lag and rates the report reads from the runner's own /metrics."""

EXECUTORS = {
    "initial": 1,
    "cores": 1,
    "memory": "512m",
    "cpu": "400m",
    "cpuLimit": "500m",
    "memoryOverhead": "384m",
}


def policy_doc() -> dict[str, Any]:
    """At most 4 executors (what two workers on this machine hold beside the driver and the
    controller), repartition allowed, a 20 s lag SLO, short windows so the run fits in minutes."""
    return {
        "apiVersion": "stream-autoscaler.io/v1alpha1",
        "kind": "ScalingPolicy",
        "metadata": {"name": POLICY, "namespace": NAMESPACE},
        "spec": {
            "mode": "enforce",
            "executors": {"min": 1, "max": 4},
            "partitions": {
                "min": 1,
                "max": 8,
                "repartition": True,
                "perSlot": 1,
                "maxDowntimeSeconds": 120,
            },
            "utilization": {"target": 0.6, "low": 0.3, "high": 0.85},
            "lag": {"sloSeconds": SLO_SECONDS, "catchUpSeconds": 40},
            "timing": {
                "evaluationIntervalSeconds": 4,
                "windowSeconds": 16,
                "staleAfterSeconds": 40,
                "cooldownSeconds": 16,
                "scaleDownStabilizationSeconds": 30,
            },
        },
    }


def job_doc(root: str) -> dict[str, Any]:
    """The burst StreamJob with everything under ``root`` (the volume's mount path in the pods,
    or the host directory for the verifier)."""
    return {
        "apiVersion": "stream-autoscaler.io/v1alpha1",
        "kind": "StreamJob",
        "metadata": {"name": JOB, "namespace": NAMESPACE},
        "spec": {
            "policyRef": {"name": POLICY},
            "source": {
                "type": "burst",
                "trace": f"{root}/{JOB}/trace.csv",
                "keys": 20000,
                "partitions": 4,
                "maxRecordsPerBatch": 200_000,
            },
            "pipeline": [
                {
                    "type": "aggregate",
                    "name": "count-by-key",
                    "keys": ["key"],
                    "aggregations": [
                        {"fn": "count"},
                        {"fn": "sum", "column": "value", "as": "total"},
                    ],
                }
            ],
            "sink": {"type": "files", "path": f"{root}/{JOB}/out"},
            "trigger": {"intervalSeconds": 2},
            "checkpoint": {
                "location": f"{root}/{JOB}/checkpoint",
                "volume": {"claimName": CLAIM, "mountPath": SHARED_PATH},
            },
            "statePartitions": 2,
            "executors": EXECUTORS,
        },
    }


def volume_docs() -> list[dict[str, Any]]:
    """The host directory as a ReadWriteMany volume, pre-bound to the claim the jobs name."""
    pv: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": f"{CLAIM}-kind"},
        "spec": {
            "capacity": {"storage": "5Gi"},
            "accessModes": ["ReadWriteMany"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "",
            "hostPath": {"path": SHARED_PATH, "type": "Directory"},
            "claimRef": {"namespace": NAMESPACE, "name": CLAIM},
        },
    }
    pvc = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": CLAIM,
            "namespace": NAMESPACE,
            "labels": {"stream-autoscaler.io/job-reference": "true"},
        },
        "spec": {
            "accessModes": ["ReadWriteMany"],
            "storageClassName": "",
            "volumeName": pv["metadata"]["name"],
            "resources": {"requests": {"storage": "5Gi"}},
        },
    }
    return [pv, pvc]


class KindBurstError(AppError):
    """A step of the run failed; the message names it and what was seen."""


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


LOCAL_DOCKER = "/run/stream-autoscaler-docker/docker.sock"
"""The dockerd of hack/image/build.sh, used when the default one does not answer (as lib.sh)."""


@dataclass
class NodeLoss:
    """``--lose-worker``: once a scale-out has put executors on both workers, the worker that
    holds executors and not the driver is paused (``docker pause``: its kubelet stops
    reporting, its pods' connections hang, as a lost node's do); it is unpaused when the run
    ends. Marks on the run's clock: the loss, the node seen NotReady, executors as many as before
    on the surviving nodes, the lag back under the SLO."""

    docker: str = "docker"
    node: str | None = None
    marks: dict[str, float] = field(default_factory=dict)
    executors_before: int = 0
    lag_exceeded: bool = False

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        if "DOCKER_HOST" not in env and Path(LOCAL_DOCKER).exists():
            env["DOCKER_HOST"] = f"unix://{LOCAL_DOCKER}"
        return env

    def step(self, sampler: Sampler, status: dict[str, Any], kubectl: Kubectl) -> None:
        t = sampler.rows[-1].t if sampler.rows else 0.0
        executors = [
            p
            for p in sampler.pods
            if p["metadata"]["labels"].get("spark-role") == "executor"
            and p["status"].get("phase") == "Running"
            and p["spec"].get("nodeName")
        ]
        if self.node is None:
            drivers = {
                p["spec"].get("nodeName")
                for p in sampler.pods
                if p["metadata"]["labels"].get("spark-role") == "driver"
            }
            on = {p["spec"]["nodeName"] for p in executors}
            if status.get("intent") is not None or len(on) < 2 or not on - drivers:
                return
            self.node = sorted(on - drivers)[0]
            self.executors_before = len(executors)
            subprocess.run(
                [self.docker, "pause", self.node],
                check=True,
                env=self.env(),
                capture_output=True,
                timeout=60,
            )
            self.marks["lost"] = t
            print(
                f"kind-burst: paused worker {self.node} ({self.executors_before} executors "
                f"running, {sum(p['spec']['nodeName'] == self.node for p in executors)} on it)"
            )
            return
        if "node_not_ready" not in self.marks:
            node = kubectl.json("get", "node", self.node)
            ready = next(
                (c["status"] for c in node["status"].get("conditions", []) if c["type"] == "Ready"),
                "Unknown",
            )
            if ready != "True":
                self.marks["node_not_ready"] = t
        alive = [p for p in executors if p["spec"]["nodeName"] != self.node]
        if "replacements_running" not in self.marks and len(alive) >= self.executors_before:
            self.marks["replacements_running"] = t
        lag = sampler.rows[-1].lag_seconds if sampler.rows else None
        if lag is not None and lag > SLO_SECONDS:
            self.lag_exceeded = True
        if (
            "lag_under_slo" not in self.marks
            and self.lag_exceeded
            and lag is not None
            and lag <= SLO_SECONDS
        ):
            self.marks["lag_under_slo"] = t

    def restore(self) -> None:
        if self.node is not None:
            subprocess.run(
                [self.docker, "unpause", self.node], env=self.env(), capture_output=True, timeout=60
            )

    def figures(self) -> dict[str, Any]:
        lost = self.marks.get("lost")
        return {
            "node": self.node,
            "executors_before": self.executors_before,
            "lag_exceeded_slo": self.lag_exceeded,
            **{
                f"{k}_after_s": round(v - lost, 1)
                for k, v in self.marks.items()
                if lost is not None and k != "lost"
            },
            "lost_at_s": lost,
        }


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


def verify_on_host(shared: Path) -> dict[str, Any]:
    """The verifier with the host's pyspark over the volume's directory (the files the pods
    wrote), in its own process: what the checkpoint committed, every key counted once."""
    doc = job_doc(str(shared))
    doc["spec"]["checkpoint"] = {"location": str(shared / JOB / "checkpoint")}
    path = shared / JOB / "verify-job.yaml"
    path.write_text(yaml.safe_dump(doc))
    code = (
        "import json, sys\nfrom app.demo_job import verify_exactly_once\n"
        "from contracts.manifests import load_job\n"
        "print(json.dumps(verify_exactly_once(load_job(sys.argv[1]).spec), default=str))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=900
    )
    if out.returncode != 0:
        raise KindBurstError(f"the verifier failed: {out.stderr.strip()[-2000:]}")
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def run(args: argparse.Namespace) -> int:
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    shared = Path(args.shared)
    kubectl = Kubectl(args.context, args.kubectl)
    nodes = kubectl.json("get", "nodes")["items"]
    workers = [
        n["metadata"]["name"]
        for n in nodes
        if "node-role.kubernetes.io/control-plane" not in n["metadata"]["labels"]
    ]
    print(f"kind-burst: {len(nodes)} nodes ({len(workers)} workers: {', '.join(workers)})")
    # a fresh run: the last run's job, checkpoint and output go
    kubectl.run("delete", "streamjob", JOB, "-n", NAMESPACE, "--ignore-not-found", "--timeout=180s")
    work = shared / JOB
    if work.exists():
        subprocess.run(["rm", "-rf", str(work)], check=True)
    work.mkdir(parents=True)
    (work / "trace.csv").write_text(TRACE)
    for p in (shared, work, work / "trace.csv"):
        os.chown(p, RUNNER_UID, RUNNER_UID)
    kubectl.apply(volume_docs())
    kubectl.apply([policy_doc(), job_doc(SHARED_PATH)])
    print(f"kind-burst: applied StreamJob {NAMESPACE}/{JOB}; `kubectl get streamjobs --watch`:")
    watch = subprocess.Popen(
        [args.kubectl, "--context", args.context, "get", "streamjobs", "-n", NAMESPACE, "--watch"]
    )
    sampler = Sampler(kubectl)
    loss = NodeLoss() if args.lose_worker else None
    status: dict[str, Any] = {}
    started: float | None = None
    caught_up = True
    verdict: dict[str, Any] = {}
    try:
        deadline = time.monotonic() + MAX_WAIT_SECONDS
        while time.monotonic() < deadline:
            status = sampler.sample() or {}
            if loss is not None:
                loss.step(sampler, status, kubectl)
            if started is None and status.get("lastCommittedBatch") is not None:
                started = time.monotonic()
            if started is not None and time.monotonic() - started > TRACE_SECONDS:
                lag = sampler.rows[-1].lag_seconds
                if (
                    status.get("intent") is None
                    and lag is not None
                    and lag <= CAUGHT_UP_LAG_SECONDS
                ):
                    break
            time.sleep(SAMPLE_SECONDS)
        else:  # reported, not raised: what happened until then is the finding
            caught_up = False
            print(
                f"kind-burst: the job did not play its trace and catch up in "
                f"{MAX_WAIT_SECONDS:.0f} s",
                file=sys.stderr,
            )
        table = kubectl.run("get", "streamjobs", "-n", NAMESPACE)
        events = job_events(kubectl)
        if loss is not None:
            loss.restore()  # its pods then end, so the StreamJob's deletion can finish
        kubectl.run("delete", "streamjob", JOB, "-n", NAMESPACE, "--timeout=180s")
    finally:
        watch.terminate()
        watch.wait(10)
        if loss is not None:
            loss.restore()
    print("kind-burst: StreamJob deleted (stopped at a batch boundary); verifying on the host")
    verdict = verify_on_host(shared)
    actions = actions_of(status, events, sampler.t0)
    lead = trace_lead(str(shared / JOB / "checkpoint"), sampler.t0)
    if lead is not None:  # what arrived, on the burst source's own clock
        fill_arrivals(sampler.rows, load_trace(str(shared / JOB / "trace.csv")), lead)
    summary = summarize(sampler.rows, SLO_SECONDS, actions)
    summary.update(
        {
            "exactly_once": bool(verdict.get("exactly_once")),
            "verifier": verdict,
            "nodes": {
                "cluster": [n["metadata"]["name"] for n in nodes],
                "workers": workers,
                "driver": sorted(sampler.nodes["driver"]),
                "executors": sorted(sampler.nodes["executor"]),
            },
            "peak_executors": sampler.peak_executors,
            "actions": [action_line(a) for a in actions],
            "table": table,
        }
    )
    summary["caught_up"] = caught_up
    summary["unobserved_seconds"] = round(sampler.unobserved_seconds, 1)
    if loss is not None:
        summary["node_loss"] = loss.figures()
    write_timeline(out_dir / "timeline.csv", sampler.rows)
    plot(
        out_dir / "timeline.png",
        sampler.rows,
        SLO_SECONDS,
        f"kind-burst: {len(nodes)} nodes, peak {sampler.peak_executors} executors",
        actions,
    )
    (out_dir / "actions.json").write_text(json.dumps(actions, indent=1))
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
    print(
        json.dumps(
            {
                k: summary[k]
                for k in (
                    "exactly_once",
                    "nodes",
                    "peak_executors",
                    "actions",
                    "slo_violation_seconds",
                )
            },
            indent=1,
        )
    )
    print(f"kind-burst: report in {out_dir}/")
    return 0 if summary["exactly_once"] and caught_up else 1


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="kind-burst", description=__doc__.split("\n")[0])
    p.add_argument("--out", default="out/kind-burst")
    p.add_argument("--context", default="kind-stream-autoscaler")
    p.add_argument("--kubectl", default="kubectl")
    p.add_argument("--shared", required=True, help="the host directory the workers mount")
    p.add_argument(
        "--lose-worker",
        action="store_true",
        help="pause the worker holding executors (not the driver) once they run on both",
    )
    args = p.parse_args(argv)
    # the scrape's warnings (the driver not up yet, a restart) would break the live table; an
    # unreadable sample is counted in the summary's unobserved_seconds instead
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.ERROR))
    try:
        return run(args)
    except KindBurstError as e:
        print(f"kind-burst: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
