"""The failures `make kind-burst` causes on request (app/kind_burst.py): ``--kill-controller``
(:class:`ControllerKill`), ``--lose-worker`` (:class:`NodeLoss`), ``--kill-executor``
(:class:`ExecutorKill`), ``--lose-driver-node`` (:class:`DriverNodeLoss`), each stepping on the
sampler's view and marking, on the run's clock, when the job recovered from it."""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.kind_burst_job import NAMESPACE, SLO_SECONDS
from app.kind_burst_watch import Kubectl, Sampler, ScaleIns, runner_status

LOCAL_DOCKER = "/run/stream-autoscaler-docker/docker.sock"
"""The dockerd of hack/image/build.sh, used when the default one does not answer (as lib.sh)."""


def _docker_env() -> dict[str, str]:
    env = dict(os.environ)
    if "DOCKER_HOST" not in env and Path(LOCAL_DOCKER).exists():
        env["DOCKER_HOST"] = f"unix://{LOCAL_DOCKER}"
    return env


CONTROLLER_NAMESPACE = "stream-autoscaler-system"
"""Where hack/kind/install.sh puts the chart (hack/kind/lib.sh NAMESPACE)."""
LEASE = "stream-autoscaler-controller"
"""The controllers' leader-election Lease (controller/kube/settings.py); its holder is the
leading pod's name."""


def _leader(kubectl: Kubectl) -> str:
    lease = kubectl.json("get", "lease", LEASE, "-n", CONTROLLER_NAMESPACE)
    return str(lease["spec"].get("holderIdentity") or "")


@dataclass
class ControllerKill:
    """``--kill-controller``: the leading controller pod force-deleted while the run's first
    action is in flight (the StreamJob's ``status.intent``, written before the action starts).
    The standby takes the Lease and finishes that action from the intent: the runner's record
    of it says how often it was asked (once, and answered each repeat without starting it
    again: ``duplicates``) and how it ended. Marks on the run's clock: the kill, the intent
    cleared (the action done), a new leader."""

    kubectl: Kubectl
    leader: str | None = None
    new_leader: str | None = None
    intent: dict[str, Any] = field(default_factory=dict)
    record: dict[str, Any] | None = None
    marks: dict[str, float] = field(default_factory=dict)

    def step(self, sampler: Sampler, status: dict[str, Any]) -> None:
        t = sampler.rows[-1].t if sampler.rows else 0.0
        if self.leader is None:
            intent: dict[str, Any] = status.get("intent") or {}
            holder = _leader(self.kubectl) if intent else ""
            if not holder:
                return
            self.leader, self.intent = holder, intent
            self.kubectl.run("delete", "pod", holder, "-n", CONTROLLER_NAMESPACE,
                             "--grace-period=0", "--force", "--wait=false")
            self.marks["killed"] = t
            print(f"kind-burst: deleted the leading controller {holder} during "
                  f"{intent.get('action')} {intent.get('actionId')}")
            return
        if self.new_leader is None:
            holder = _leader(self.kubectl)
            if holder and holder != self.leader:
                self.new_leader, self.marks["new_leader"] = holder, t
        if "action_done" not in self.marks and status.get("intent") is None:
            self.marks["action_done"] = t
        if "action_done" in self.marks and self.record is None:
            runner = runner_status(self.kubectl, sampler.pods)
            if runner is None:
                return
            ids = [a.id for a in runner.recent_actions]
            done = runner.find_action(self.intent["actionId"])
            self.record = {
                "records": ids.count(self.intent["actionId"]),
                "state": None if done is None else str(done.state),
                "duplicates": None if done is None else done.duplicates,
                "kind": None if done is None else str(done.kind),
            }

    def figures(self) -> dict[str, Any]:
        killed = self.marks.get("killed")
        return {
            "leader": self.leader,
            "new_leader": self.new_leader,
            "action": self.intent.get("action"),
            "action_id": self.intent.get("actionId"),
            "runner_record": self.record,
            **{f"{k}_after_s": round(v - killed, 1)
               for k, v in self.marks.items() if killed is not None and k != "killed"},
            "killed_at_s": killed,
        }


def _ready(kubectl: Kubectl, node: str) -> str:
    """The node's Ready condition: True, False or Unknown (a node that stopped reporting)."""
    doc = kubectl.json("get", "node", node)
    return next((c["status"] for c in doc["status"].get("conditions", [])
                 if c["type"] == "Ready"), "Unknown")


@dataclass
class NodeLoss:
    """``--lose-worker``: once a scale-out has run, a worker that holds executors and not the
    driver is paused (``docker pause``: its kubelet stops
    reporting, its pods' connections hang, as a lost node's do); it is unpaused when the run
    ends. Marks on the run's clock: the loss, the node seen NotReady, the lost executors' pods
    gone (the runner force-deletes them: ``operators/query/node_loss.py``), the first
    replacement running on a surviving node, as many executors as before there (when the
    surviving nodes have room), the lag back under the SLO."""

    node: str | None = None
    marks: dict[str, float] = field(default_factory=dict)
    executors_before: int = 0
    pods_before: frozenset[str] = frozenset()
    driver_node: str | None = None
    comes_back: bool = False
    """Unpause the node once the job has recovered without it (``--lose-driver-node`` then has
    a worker for the driver to move to)."""
    lag_exceeded: bool = False

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
            # after a scale-out, a worker with executors and not the driver: where the scheduler
            # put them is its choice (under load all of them may sit on one worker)
            if status.get("intent") is not None or len(executors) < 2 or not on - drivers:
                return
            self.node = sorted(on - drivers)[0]
            self.driver_node = sorted(d for d in drivers if d)[0] if any(drivers) else None
            self.executors_before = len(executors)
            self.pods_before = frozenset(p["metadata"]["name"] for p in executors)
            subprocess.run(
                [DOCKER, "pause", self.node],
                check=True,
                env=_docker_env(),
                capture_output=True,
                timeout=60,
            )
            self.marks["lost"] = t
            print(
                f"kind-burst: paused worker {self.node} ({self.executors_before} executors "
                f"running, {sum(p['spec']['nodeName'] == self.node for p in executors)} on it)"
            )
            return
        if "node_not_ready" not in self.marks and _ready(kubectl, self.node) != "True":
            self.marks["node_not_ready"] = t
        on_lost = [p for p in sampler.pods if p["spec"].get("nodeName") == self.node
                   and p["metadata"]["labels"].get("spark-role") == "executor"]
        if "lost_pods_removed" not in self.marks and not on_lost:
            self.marks["lost_pods_removed"] = t
        alive = [p for p in executors if p["spec"]["nodeName"] != self.node]
        new = [p for p in alive if p["metadata"]["name"] not in self.pods_before]
        if "replacement_running" not in self.marks and new:
            self.marks["replacement_running"] = t
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
        recovered = "lag_under_slo" in self.marks or (
            not self.lag_exceeded and "replacement_running" in self.marks)
        if self.comes_back and recovered and "node_back" not in self.marks:
            self.restore()
            self.marks["node_back"] = t
            print(f"kind-burst: unpaused worker {self.node}")
        if ("node_back" in self.marks and "node_ready_again" not in self.marks
                and _ready(kubectl, self.node) == "True"):
            self.marks["node_ready_again"] = t

    def restore(self) -> None:
        if self.node is not None and "node_back" not in self.marks:
            subprocess.run(
                [DOCKER, "unpause", self.node], env=_docker_env(), capture_output=True,
                timeout=60,
            )

    def figures(self, events: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        """When each mark came after the loss (s); ``event``: the controller's ExecutorsLost
        Event, which names the node."""
        lost = self.marks.get("lost")
        named = [e["message"] for e in events or [] if e["reason"] == "ExecutorsLost"]
        return {
            "node": self.node,
            "driver_node": self.driver_node,
            "event": named[0] if named else None,
            "executors_before": self.executors_before,
            "lag_exceeded_slo": self.lag_exceeded,
            **{
                f"{k}_after_s": round(v - lost, 1)
                for k, v in self.marks.items()
                if lost is not None and k != "lost"
            },
            "lost_at_s": lost,
        }


DOCKER = "docker"
DRIVER_LOSS_AFTER_SECONDS = 200.0
"""``--lose-driver-node`` crashes the driver's node no sooner than this into the run (in the
trace's second burst), and only once the other failures asked for have recovered and a scale-in
has been carried out (in the quiet between the bursts, or else in the tail after them)."""

KILL_AFTER_SECONDS = 190.0
"""``--kill-executor`` deletes an executor pod this long into the run: in the trace's second
burst (180-260 s), after a lost worker's replacement when both are asked for."""


@dataclass
class ExecutorKill:
    """``--kill-executor``: one executor pod deleted (``kubectl delete pod``, as a person or an
    eviction does) :data:`KILL_AFTER_SECONDS` into the run, after ``--lose-worker``'s
    replacement if that runs too; Spark replaces it up to its target. Marks on the run's clock:
    the kill, its pod gone, a replacement running."""

    kubectl: Kubectl
    after: NodeLoss | None = None
    pod: str | None = None
    pods_before: frozenset[str] = frozenset()
    marks: dict[str, float] = field(default_factory=dict)

    def step(self, sampler: Sampler, status: dict[str, Any]) -> None:
        t = sampler.rows[-1].t if sampler.rows else 0.0
        running = [p for p in sampler.pods
                   if p["metadata"]["labels"].get("spark-role") == "executor"
                   and p["status"].get("phase") == "Running"
                   and not p["metadata"].get("deletionTimestamp")]
        names = {p["metadata"]["name"] for p in running}
        if self.pod is None:
            waiting = self.after is not None and (
                self.after.node is None or "replacement_running" not in self.after.marks)
            if t < KILL_AFTER_SECONDS or waiting or status.get("intent") is not None:
                return
            if not running:
                return
            victim = max(running, key=lambda p: p["metadata"]["creationTimestamp"])
            self.pod, self.pods_before = victim["metadata"]["name"], frozenset(names)
            self.kubectl.run("delete", "pod", self.pod, "-n", NAMESPACE, "--wait=false")
            self.marks["killed"] = t
            print(f"kind-burst: deleted executor pod {self.pod} "
                  f"({len(running)} executors running)")
            return
        if "pod_gone" not in self.marks and self.pod not in {
                p["metadata"]["name"] for p in sampler.pods}:
            self.marks["pod_gone"] = t
        if "replacement_running" not in self.marks and names - self.pods_before:
            self.marks["replacement_running"] = t

    def figures(self) -> dict[str, Any]:
        killed = self.marks.get("killed")
        return {
            "pod": self.pod,
            **{f"{k}_after_s": round(v - killed, 1)
               for k, v in self.marks.items() if killed is not None and k != "killed"},
            "killed_at_s": killed,
        }


@dataclass
class DriverNodeLoss:
    """``--lose-driver-node``: the node running the driver crashes (``docker kill``: every
    process on it ends, as at a power loss; the checkpoint's lock is released with its holder),
    once the other failures asked for have recovered, the lost worker is back and a scale-in has
    been carried out (the recovery may size the job at the policy's minimum, leaving the quiet
    nothing to scale in: the run's scale-in is seen before the crash). Kubernetes
    marks the driver pod not Ready; the controller force-deletes it and recreates it on the other
    worker from the latest checkpoint. Marks on the run's clock: the crash, the node seen
    NotReady, the old driver pod gone, the new one running, its first committed batch, the lag
    back under the SLO. The node is started again when the run ends."""

    kubectl: Kubectl
    loss: NodeLoss | None = None
    kill: ExecutorKill | None = None
    scale_ins: ScaleIns | None = None
    node: str | None = None
    batch_before: int | None = None
    old_uid: str | None = None
    old_pod: str | None = None
    marks: dict[str, float] = field(default_factory=dict)
    lag_exceeded: bool = False
    started: bool = False
    recovery_target: int | None = None
    """The executors the StreamJob's status asked for when the new driver ran: the recovery's
    sizing."""
    resumed_from_batch: int | None = None
    start_steps: dict[str, float] | None = None
    """The recovered runner's start, step by step (its ``/status`` ``startSteps`` at its first
    commit): where the time from the new driver running to that commit went."""
    first_batch: dict[str, Any] | None = None
    """That first commit's batch (``/status`` ``startFirstBatch``): its rows, its own seconds,
    and whether it replayed the batch the lost driver left in flight."""
    lost_unix: float = 0.0

    def step(self, sampler: Sampler, status: dict[str, Any]) -> None:
        t = sampler.rows[-1].t if sampler.rows else 0.0
        drivers = [p for p in sampler.pods
                   if p["metadata"]["labels"].get("spark-role") == "driver"]
        if self.node is None:
            ready = (self.loss is None or "node_ready_again" in self.loss.marks) and (
                self.kill is None or "replacement_running" in self.kill.marks) and (
                self.scale_ins is None or any(d["state"] for d in self.scale_ins.done))
            running = [p for p in drivers if p["status"].get("phase") == "Running"
                       and p["spec"].get("nodeName")]
            if t < DRIVER_LOSS_AFTER_SECONDS or not ready or not running:
                return
            if status.get("intent") is not None or status.get("lastCommittedBatch") is None:
                return
            self.node, self.old_uid = running[0]["spec"]["nodeName"], running[0]["metadata"]["uid"]
            self.old_pod = running[0]["metadata"]["name"]
            self.batch_before = int(status["lastCommittedBatch"])
            subprocess.run([DOCKER, "kill", self.node], check=True, env=_docker_env(),
                           capture_output=True, timeout=60)
            self.marks["lost"] = t
            self.lost_unix = time.time()
            print(f"kind-burst: killed node {self.node}, the driver's (batch {self.batch_before})")
            return
        if "node_not_ready" not in self.marks and _ready(self.kubectl, self.node) != "True":
            self.marks["node_not_ready"] = t
        if "old_driver_gone" not in self.marks and not any(
                p["metadata"]["uid"] == self.old_uid for p in drivers):
            self.marks["old_driver_gone"] = t
        if "driver_running" not in self.marks and any(
                p["metadata"]["uid"] != self.old_uid and p["status"].get("phase") == "Running"
                for p in drivers):
            self.marks["driver_running"] = t
            self.recovery_target = (status.get("executors") or {}).get("target")
        if "first_commit" not in self.marks and "driver_running" in self.marks:
            # the new runner's own word: the StreamJob's status may still show the lost
            # driver's last commit and the batch an earlier restart resumed from
            runner = runner_status(self.kubectl, [p for p in drivers
                                                  if p["metadata"]["uid"] != self.old_uid])
            if (runner is not None and runner.last_committed_batch is not None
                    and runner.resumed_from_batch is not None
                    and runner.last_committed_batch > runner.resumed_from_batch):
                self.marks["first_commit"] = t
                self.resumed_from_batch = runner.resumed_from_batch
                self.start_steps = dict(runner.start_steps or {}) or None
                self.first_batch = (runner.start_first_batch.to_wire()
                                    if runner.start_first_batch else None)
        lag = sampler.rows[-1].lag_seconds if sampler.rows else None
        if lag is not None and lag > SLO_SECONDS:
            self.lag_exceeded = True
        if ("lag_under_slo" not in self.marks and self.lag_exceeded and lag is not None
                and lag <= SLO_SECONDS and "first_commit" in self.marks):
            self.marks["lag_under_slo"] = t

    def restore(self) -> None:
        if self.node is not None and not self.started:
            self.started = True
            subprocess.run([DOCKER, "start", self.node], env=_docker_env(),
                           capture_output=True, timeout=120)

    def figures(self, events: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        lost = self.marks.get("lost")
        named = [e["message"] for e in events or [] if e["reason"] == "DriverNodeLost"]
        recovered = [e["message"] for e in events or [] if e["reason"] == "RecoverFromFailure"
                     and lost is not None and e["time"] >= self.lost_unix - 2.0]
        return {
            "node": self.node,
            "driver_pod": self.old_pod,
            "batch_before": self.batch_before,
            "resumed_from_batch": self.resumed_from_batch,
            "recovery_event": recovered[0] if recovered else None,
            "recovery_target": self.recovery_target,
            "recovery_start_steps": self.start_steps,
            "recovery_first_batch": self.first_batch,
            "lag_exceeded_slo": self.lag_exceeded,
            "event": named[0] if named else None,
            **{f"{k}_after_s": round(v - lost, 1) for k, v in self.marks.items()
               if lost is not None and k != "lost"},
            "lost_at_s": lost,
        }
