"""What the real-pod stories share: the test bed's chart install, a StreamJob's story (marks,
bounded waits that print the pods, the controller's log tail and the runner's status on
failure), the driver's runner read through its pod address, and the figures of actions and
pods."""

from __future__ import annotations

import base64
import json
import re
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from contracts.runner_api import ActionRecord, RunnerStatus
from tests.integration.k8s.controller_env import events, status, wait_for
from tests.integration.k8s.k8s_tier import REPO, Tool
from tests.integration.node.conftest import RealNode

KIND_VALUES = REPO / "hack" / "kind" / "values-kind.yaml"
CHART = REPO / "helm" / "stream-autoscaler"


class Story:
    """What a failed wait prints: pods, the controller's log tail, the runner's status.

    The job runs in ``ns``; the chart's release (the controller pods, their Lease) in
    ``ctl_ns``: the chart never runs jobs in its own namespace."""

    def __init__(self, kubectl: Tool, ns: str, work: Path, job: str) -> None:
        self.kubectl, self.ns, self.work, self.job = kubectl, ns, work, job
        self.ctl_ns = f"{ns}-ctl"
        self.t0 = time.monotonic()
        self.marks: dict[str, float] = {}

    def mark(self, what: str) -> float:
        self.marks[what] = round(time.monotonic() - self.t0, 1)
        print(f"[{self.marks[what]:7.1f} s] {what}", flush=True)
        return self.marks[what]

    def pods(self, selector: str = "", ns: str | None = None) -> list[dict[str, Any]]:
        args = ["get", "pods", "-n", ns or self.ns] + (["-l", selector] if selector else [])
        return list(self.kubectl.json(*args)["items"])

    def controllers(self) -> list[dict[str, Any]]:
        return self.pods("app.kubernetes.io/component=controller", self.ctl_ns)

    def runner(self) -> RunnerStatus | None:
        pod = next((p for p in self.pods("spark-role=driver")
                    if p["status"].get("podIP") and p["status"].get("phase") == "Running"), None)
        if pod is None:
            return None
        sec = self.kubectl.json("get", "secret", f"{self.job}-control-token", "-n", self.ns)
        token = base64.b64decode(sec["data"]["token"]).decode().strip()
        port = next(p["containerPort"] for p in pod["spec"]["containers"][0]["ports"]
                    if p["name"] == "control")
        req = urllib.request.Request(f"http://{pod['status']['podIP']}:{port}/status",
                                     headers={"Authorization": f"Bearer {token}"})
        try:
            with urllib.request.urlopen(req, timeout=5) as r:
                return RunnerStatus.model_validate(json.loads(r.read()))
        except OSError:
            return None

    def diagnose(self) -> str:
        out = [self.kubectl("get", "pods", "-n", self.ns, "-o", "wide", check=False).stdout]
        for p in self.controllers():
            out.append(f"--- {p['metadata']['name']} log tail")
            out.append(self.kubectl("logs", p["metadata"]["name"], "-n", self.ctl_ns,
                                    "--tail=25", check=False).stdout)
        for p in self.pods("spark-role=driver"):
            out.append(f"--- {p['metadata']['name']} ({p['status'].get('phase')}) log tail")
            out.append(self.kubectl("logs", p["metadata"]["name"], "-n", self.ns, "--tail=25",
                                    check=False).stdout)
        with _quiet():
            r = self.runner()
            out.append(f"--- runner status: {json.dumps(r.to_wire() if r else None)[:2500]}")
            job = status(self.kubectl, self.ns, self.job)
            out.append(f"--- job status: {json.dumps(job)[:2500]}")
            out.append("--- events: " + "; ".join(
                f"{e['reason']}: {e['message'][:120]}"
                for e in events(self.kubectl, self.ns, self.job)))
        return "\n".join(out)

    def wait(self, what: str, fn: Callable[[], Any], timeout: float, every: float = 1.0) -> Any:
        try:
            got = wait_for(what, fn, timeout, every)
        except AssertionError as e:
            pytest.fail(f"{e}\n{self.diagnose()}", pytrace=False)
        self.mark(what)
        return got

    def reasons(self) -> list[str]:
        evs = sorted(events(self.kubectl, self.ns, self.job),
                     key=lambda e: e.get("lastTimestamp") or e.get("eventTime") or "")
        return [e["reason"] for e in evs]


class _quiet:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> bool:
        return True


def executors_running(story: Story) -> int:
    return sum(1 for p in story.pods("spark-role=executor")
               if p["status"].get("phase") == "Running" and not p["metadata"].get(
                   "deletionTimestamp"))


def overlay_values(real_node: RealNode, ns: str, work: Path, replicas: int = 2) -> Path:
    """The test bed's overlay on hack/kind/values-kind.yaml (the same base as kind): the node's
    placement, 2 replicas (or ``replicas``), jobs in this namespace (made by the test)."""
    placement = {
        "nodeSelector": {"kubernetes.io/hostname": real_node.name},
        "tolerations": [{"key": real_node.taint_key, "operator": "Exists",
                         "effect": "NoSchedule"}],
    }
    values = {
        "replicaCount": replicas,
        "jobNamespaces": [ns],
        "createJobNamespaces": False,
        "rbac": {"scope": "namespaced"},
        "controller": {"watchNamespace": ns},
        **placement,
        "sparkPods": {**placement, "driverCpu": "300m", "driverMemory": "1Gi"},
    }
    path = work / "values-testbed.yaml"
    path.write_text(yaml.safe_dump(values))
    return path


def install(helm: Tool, story: Story, values: Path, release: str) -> None:
    """The chart in the story's own release namespace, its jobs in the story's namespace."""
    t = time.monotonic()
    helm("upgrade", "--install", release, str(CHART), "-n", story.ctl_ns, "--create-namespace",
         "--values", str(KIND_VALUES), "--values", str(values), "--wait", "--timeout", "4m")
    story.marks["helm_install_s"] = round(time.monotonic() - t, 1)


def uninstall(helm: Tool, story: Story, release: str) -> None:
    helm("uninstall", release, "-n", story.ctl_ns, "--wait", "--timeout=2m", check=False)
    story.kubectl("delete", "namespace", story.ctl_ns, "--wait=false", check=False)


def leader(story: Story) -> str:
    lease = story.kubectl.json("get", "lease", "stream-autoscaler-controller", "-n",
                               story.ctl_ns)
    return str(lease["spec"].get("holderIdentity") or "")


def runner_status(story: Story) -> RunnerStatus:
    r = story.runner()
    if r is None:
        raise LookupError("no running driver pod answers /status")
    return r


def action_figures(a: ActionRecord) -> dict[str, Any]:
    return {"kind": str(a.kind), "params": a.params, "timings": a.timings, "steps": a.steps,
            "result": a.result,
            "duplicates": a.duplicates, "state": str(a.state)}


def pod_start(pod: dict[str, Any]) -> float | None:
    """Created -> container started (the image is already on the node). A driver is Ready
    later, once its runner has executors and answers /healthz."""
    from datetime import datetime

    def ts(s: str) -> datetime:
        return datetime.fromisoformat(s.replace("Z", "+00:00"))

    started = next((c["state"]["running"]["startedAt"]
                    for c in pod["status"].get("containerStatuses", [])
                    if "running" in c.get("state", {})), None)
    if started is None:
        return None
    return (ts(started) - ts(pod["metadata"]["creationTimestamp"])).total_seconds()


def policy(name: str) -> dict[str, Any]:
    """The real-pod stories' ScalingPolicy: at most 3 executors (what fits beside the driver
    and two controllers on 2 cores), repartition allowed, a 20 s lag SLO, a 4 s evaluation
    interval and a 30 s scale-down stabilization so a story fits in minutes."""
    return {
        "apiVersion": "stream-autoscaler.io/v1alpha1",
        "kind": "ScalingPolicy",
        "metadata": {"name": name},
        "spec": {
            "mode": "enforce",
            "executors": {"min": 1, "max": 3},
            "partitions": {"min": 1, "max": 8, "repartition": True, "perSlot": 1,
                           "maxDowntimeSeconds": 120},
            "utilization": {"target": 0.6, "low": 0.3, "high": 0.85},
            "lag": {"sloSeconds": 20, "catchUpSeconds": 40},
            "timing": {"evaluationIntervalSeconds": 4, "windowSeconds": 16,
                       "staleAfterSeconds": 40, "cooldownSeconds": 16,
                       "scaleDownStabilizationSeconds": 30},
        },
    }


EXECUTORS = {"initial": 1, "cores": 1, "memory": "512m", "cpu": "400m", "cpuLimit": "500m",
             "memoryOverhead": "384m"}
"""Executor pods: requests that fit three executors, the driver and two controllers on 2 cores;
the limit is the CFS quota that makes each executor a measurable slice."""


JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
"""The pods' JVM flags (the job's ``spark.{driver,executor}.extraJavaOptions``): what the lanes
give the host's JVMs (hack/test.sh), for the same reason. A story on pods checks correctness at
any speed; its JVMs live minutes at half a CPU, where the C2 compiler's and G1's threads take
the quota the batches need (docs/benchmark.md, "The pods' JIT")."""


RECOVERY_FIRST_BATCH_SECONDS = 600
"""New driver pod running -> its first batch, at most. The new driver's session, a repartition at
start when the recovery adds state partitions (on S3: counted, rewritten, verified) and the first
batch, all in CPU-limited pods while the Spark lane saturates the other core: 110 s alone, 203 s
and over 300 s beside the lane on slow days (docs/benchmark.md, the suite)."""


def kill_driver_and_recover(story: Story, figures: dict[str, Any]) -> RunnerStatus:
    """``kubectl delete pod <driver> --grace-period=1``, then `RecoverFromFailure`, a new
    driver pod and a batch after ``resumedFromBatch``, resumed no earlier than the batch the
    killed driver had committed. Figures: the new pod's start, kill -> first batch, the batch
    resumed from, the state partitions at the kill. Returns the recovered runner's status.

    The kill waits for no action to be in progress, so the layout it interrupts is known: a
    repartition the controller starts in the second before the kill cannot finish its rewrite
    in it, and the new driver rolls an unfinished one back."""
    before = story.wait("no action in progress (the layout at the kill)", lambda: (
        lambda r: r if r.action is None else None)(runner_status(story)), 240)
    figures["partitions_at_kill"] = before.partitions
    old = next(p for p in story.pods("spark-role=driver"))
    killed_at = time.monotonic()
    story.kubectl("delete", "pod", old["metadata"]["name"], "-n", story.ns, "--grace-period=1")
    story.mark("deleted the driver pod")
    story.wait("RecoverFromFailure", lambda: "RecoverFromFailure" in story.reasons(), 120)
    # sized by the engine from what status last saw (arrival, backlog) and what each executor
    # delivered, to drain the outage within catchUpSeconds, not restarted at the last size
    message = figures["recovery_event"] = next(
        e["message"] for e in events(story.kubectl, story.ns, story.job)
        if e["reason"] == "RecoverFromFailure")
    sized = re.search(r"with (\d+) executor\(s\): .*need [\d,]+ records/s to drain [\d,]+ "
                      r"records within", message)
    assert sized, message
    assert f"driver pod {old['metadata']['name']} is gone (deleted, evicted or its node lost)" \
        in message, message
    assert (status(story.kubectl, story.ns, story.job).get("executors") or {}).get(
        "target") == int(sized.group(1)), message
    new = story.wait("a new driver pod runs", lambda: next(
        (p for p in story.pods("spark-role=driver")
         if p["metadata"]["uid"] != old["metadata"]["uid"]
         and p["status"].get("phase") == "Running"), None), 180)
    figures["recovered_driver_pod_start_s"] = pod_start(new)
    after: RunnerStatus = story.wait("the first batch after recovery", lambda: (
        lambda r: r if r.last_committed_batch is not None
        and r.resumed_from_batch is not None
        and r.last_committed_batch > r.resumed_from_batch else None)(runner_status(story)),
        RECOVERY_FIRST_BATCH_SECONDS)
    figures["driver_kill_to_first_batch_s"] = round(time.monotonic() - killed_at, 1)
    assert after.resumed_from_batch is not None
    assert after.resumed_from_batch >= (before.last_committed_batch or 0) - 1, (
        before.last_committed_batch, after.resumed_from_batch)
    figures["resumed_from_batch"] = after.resumed_from_batch
    figures["recovery_start_steps"] = after.start_steps  # where kill -> first batch went
    # what that first commit ran: the batch the killed driver left in flight, replayed as it
    # planned it, or a new one
    figures["recovery_first_batch"] = (after.start_first_batch.to_wire()
                                       if after.start_first_batch else None)
    return after
