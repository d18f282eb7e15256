"""`stream-autoscaler controller` against the real API server, under the chart's ServiceAccount,
with simulated runners (operators/testing/fake_runner.py: the runner's control and metrics contract)
for attached jobs, and kwok pods for managed ones."""

from __future__ import annotations

import json
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.adapters.runner_client import RunnerClient
from controller.kube.references import REFERENCE_LABEL
from operators.testing.fake_runner import FakeRunners, ModelConfig
from tests.integration.k8s.controller_env import (
    CONTROLLER_NS,
    FAST_POLICY,
    ControllerProc,
    apply,
    attached_job,
    events,
    status,
    wait_for,
)
from tests.integration.k8s.k8s_tier import REPO, Tool

pytestmark = pytest.mark.k8s
TOKEN = "fake-token"


@pytest.fixture
def ns(kubectl: Tool, namespace: str) -> str:
    """A namespace with the fast policy, the runners' token Secret and the samples' checkpoint
    claim (labelled for StreamJobs, as k8s/storage/checkpoint-claim.yaml is)."""
    apply(kubectl, FAST_POLICY, namespace)
    claim = yaml.safe_load((REPO / "k8s" / "storage" / "checkpoint-claim.yaml").read_text())
    claim["metadata"]["namespace"] = namespace
    apply(kubectl, claim)
    kubectl("create", "secret", "generic", "runner-token", "-n", namespace,
            f"--from-literal=token={TOKEN}")
    kubectl("label", "secret", "runner-token", "-n", namespace,
            "stream-autoscaler.io/runner-token=true")  # meant for runners (kube/attach.py)
    return namespace


@pytest.fixture
def controller(
    controller_kubeconfig: Path, ns: str, tmp_path: Path
) -> Iterator[ControllerProc]:
    c = ControllerProc(controller_kubeconfig, ns, tmp_path).start()
    yield c
    c.stop()


def runners_with(names: list[str], **model: Any) -> FakeRunners:
    return FakeRunners(names, token=TOKEN, config=ModelConfig(**model)).start()


def attach(kubectl: Tool, ns: str, runners: FakeRunners, name: str, **kw: Any) -> None:
    apply(kubectl, attached_job(name, ns, runners.url(name), runners.metrics_url(name), **kw))


def reasons(kubectl: Tool, ns: str, name: str) -> list[str]:
    return [e["reason"] for e in events(kubectl, ns, name)]


# --- managed mode ---------------------------------------------------------------------------


def test_managed_job_gets_owned_objects_and_status(
    kubectl: Tool, ns: str, controller: ControllerProc
) -> None:
    doc = yaml.safe_load((REPO / "k8s" / "samples" / "streamjob-burst.yaml").read_text())
    doc["metadata"] = {"name": "managed", "namespace": ns}
    doc["spec"]["policyRef"] = {"name": "fast"}
    apply(kubectl, doc)
    uid = kubectl.json("get", "sj", "managed", "-n", ns)["metadata"]["uid"]
    # without the drivers' ServiceAccount the API server refuses the pod: Degraded, named
    st = wait_for("Degraded", lambda: (s := status(kubectl, ns, "managed")).get(
        "phase") == "Degraded" and s)
    cond = next(c for c in st["conditions"] if c["type"] == "Degraded")
    assert cond["reason"] == "DriverPodRejected" and "stream-autoscaler-spark" in cond["message"]
    kubectl("create", "serviceaccount", "stream-autoscaler-spark", "-n", ns)
    for kind, name in (("pod", "managed-driver"), ("configmap", "managed-manifest"),
                       ("secret", "managed-control-token"), ("service", "managed-driver-svc")):
        obj = wait_for(f"{kind}/{name}", lambda k=kind, n=name: kubectl.json("get", k, n,
                                                                             "-n", ns))
        owner = obj["metadata"]["ownerReferences"][0]
        assert (owner["kind"], owner["uid"], owner["controller"]) == ("StreamJob", uid, True)
    pod = kubectl.json("get", "pod", "managed-driver", "-n", ns)
    args = pod["spec"]["containers"][0]["args"]
    assert args[:2] == ["runner", "--job"] and "k8s://https://kubernetes.default.svc" in args
    assert pod["spec"]["serviceAccountName"] == "stream-autoscaler-spark"
    manifest = yaml.safe_load(
        kubectl.json("get", "configmap", "managed-manifest", "-n", ns)["data"]["job.yaml"])
    conf = manifest["spec"]["spark"]["conf"]
    assert conf["spark.kubernetes.driver.pod.name"] == "managed-driver"
    assert conf["spark.driver.host"] == f"managed-driver-svc.{ns}.svc"
    st = wait_for("status", lambda: status(kubectl, ns, "managed").get("phase"))
    assert st in ("Pending", "Running", "Degraded")
    assert "stream-autoscaler.io/stop-at-batch-boundary" in kubectl.json(
        "get", "sj", "managed", "-n", ns)["metadata"]["finalizers"]
    wide = kubectl("get", "sj", "managed", "-n", ns).stdout
    assert ("PHASE" in wide and "EXECUTORS" in wide and "Pending" in wide) or "Running" in wide


def test_objects_with_the_jobs_names_are_never_adopted_patched_or_deleted(
    kubectl: Tool, ns: str, controller: ControllerProc
) -> None:
    """A pod ``squat-driver`` and a ConfigMap ``squat-manifest`` made by someone else: the
    StreamJob ``squat`` is Degraded ``NotOwned`` naming each in turn, and neither is touched."""
    kubectl("create", "configmap", "squat-manifest", "-n", ns, "--from-literal=job.yaml=mine")
    apply(kubectl, {"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": "squat-driver", "namespace": ns},
                    "spec": {"containers": [{"name": "c", "image": "pause"}]}})
    pod_uid = kubectl.json("get", "pod", "squat-driver", "-n", ns)["metadata"]["uid"]
    doc = yaml.safe_load((REPO / "k8s" / "samples" / "streamjob-burst.yaml").read_text())
    doc["metadata"] = {"name": "squat", "namespace": ns}
    doc["spec"]["policyRef"] = {"name": "fast"}
    apply(kubectl, doc)

    def degraded_naming(what: str) -> dict[str, Any] | None:
        st = status(kubectl, ns, "squat")
        cond = next((c for c in st.get("conditions", []) if c["type"] == "Degraded"), None)
        return cond if cond and cond["reason"] == "NotOwned" and what in cond["message"] \
            else None

    cond = wait_for("Degraded NotOwned naming the pod", lambda: degraded_naming(
        f"Pod {ns}/squat-driver"))
    assert "not owned by this StreamJob" in cond["message"], cond
    assert kubectl.json("get", "pod", "squat-driver", "-n", ns)["metadata"]["uid"] == pod_uid
    kubectl("delete", "pod", "squat-driver", "-n", ns, "--wait=true")
    wait_for("Degraded NotOwned naming the ConfigMap", lambda: degraded_naming(
        f"ConfigMap {ns}/squat-manifest"))
    cm = kubectl.json("get", "configmap", "squat-manifest", "-n", ns)
    assert cm["data"] == {"job.yaml": "mine"} and not cm["metadata"].get("ownerReferences")
    assert not kubectl("get", "pod", "squat-driver", "-n", ns, check=False).stdout.strip()


def test_a_script_from_a_configmap_is_checked_then_mounted_in_the_driver(
    kubectl: Tool, ns: str, controller: ControllerProc
) -> None:
    """``spec.application.configMap``: until the ConfigMap holds the script the job is Degraded
    ``ApplicationNotFound`` naming what is missing (no driver pod waiting on a volume); then the
    driver pod mounts it read-only and the manifest it runs points at the mounted script."""
    kubectl("create", "serviceaccount", "stream-autoscaler-spark", "-n", ns)
    doc = yaml.safe_load((REPO / "k8s" / "samples" / "streamjob-script.yaml").read_text())
    doc["metadata"] = {"name": "script", "namespace": ns}
    doc["spec"]["policyRef"] = {"name": "fast"}
    doc["spec"]["application"] = {"configMap": "wordcount-script", "script": "wordcount.py",
                                  "args": ["/out"]}
    apply(kubectl, doc)

    def degraded() -> dict[str, Any] | None:
        st = status(kubectl, ns, "script")
        return next((c for c in st.get("conditions", []) if c["type"] == "Degraded"
                     and c["status"] == "True"), None)

    cond = wait_for("Degraded", degraded)
    assert cond["reason"] == "ApplicationNotFound", cond
    assert f"ConfigMap {ns}/wordcount-script not found" in cond["message"], cond
    assert kubectl("get", "pod", "script-driver", "-n", ns, check=False).returncode != 0
    script = (REPO / "examples" / "pyspark" / "rate_wordcount.py").read_text()
    kubectl("create", "configmap", "wordcount-script", "-n", ns,
            f"--from-literal=other.py={script}")
    cond = wait_for("the missing key named", lambda: (c := degraded()) and "has no key" in c[
        "message"] and c)
    assert "'wordcount.py' (keys: other.py)" in cond["message"], cond
    kubectl("delete", "configmap", "wordcount-script", "-n", ns)
    kubectl("create", "configmap", "wordcount-script", "-n", ns,
            f"--from-literal=wordcount.py={script}")
    cond = wait_for("the missing consent named", lambda: (c := degraded()) and c[
        "reason"] == "ReferenceNotAllowed" and c)
    assert f"ConfigMap {ns}/wordcount-script is not labelled" in cond["message"], cond
    kubectl("label", "configmap", "wordcount-script", "-n", ns, f"{REFERENCE_LABEL}=true")
    pod = wait_for("the driver pod", lambda: kubectl.json("get", "pod", "script-driver",
                                                          "-n", ns))
    container = pod["spec"]["containers"][0]
    mount = next(m for m in container["volumeMounts"] if m["name"] == "application")
    assert (mount["mountPath"], mount.get("readOnly")) == (
        "/opt/stream-autoscaler/application", True)
    volume = next(v for v in pod["spec"]["volumes"] if v["name"] == "application")
    assert volume["configMap"]["name"] == "wordcount-script"
    manifest = yaml.safe_load(
        kubectl.json("get", "configmap", "script-manifest", "-n", ns)["data"]["job.yaml"])
    assert manifest["spec"]["application"]["script"] == (
        "/opt/stream-autoscaler/application/wordcount.py")


def test_a_job_mounts_only_what_consents(
    kubectl: Tool, ns: str, controller: ControllerProc
) -> None:
    """A spec naming a claim or a Secret of the namespace that is not meant for StreamJobs (a
    database's volume, another team's keys): Degraded ``ReferenceNotAllowed`` naming it and the
    label that consents, and no driver pod; a Secret without the keys the pods read is
    ``ReferenceNotFound`` naming the key. Labelled, each is mounted."""
    kubectl("create", "serviceaccount", "stream-autoscaler-spark", "-n", ns)
    apply(kubectl, {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                    "metadata": {"name": "db-data", "namespace": ns},
                    "spec": {"accessModes": ["ReadWriteOnce"],
                             "resources": {"requests": {"storage": "1Gi"}}}})
    kubectl("create", "secret", "generic", "team-keys", "-n", ns,
            "--from-literal=AWS_ACCESS_KEY_ID=theirs")
    sample = yaml.safe_load((REPO / "k8s" / "samples" / "streamjob-burst.yaml").read_text())
    for name, checkpoint in (
        ("on-claim", {"location": "/data/on-claim",
                      "volume": {"claimName": "db-data", "mountPath": "/data"}}),
        ("on-keys", {"location": "s3a://checkpoints/on-keys",
                     "credentials": {"secretName": "team-keys"}}),
    ):
        doc = {**sample, "metadata": {"name": name, "namespace": ns},
               "spec": {**sample["spec"], "policyRef": {"name": "fast"},
                        "checkpoint": checkpoint}}
        apply(kubectl, doc)

    def degraded(name: str, reason: str) -> dict[str, Any] | None:
        st = status(kubectl, ns, name)
        return next((c for c in st.get("conditions", []) if c["type"] == "Degraded"
                     and c["status"] == "True" and c["reason"] == reason), None)

    cond = wait_for("the claim refused", lambda: degraded("on-claim", "ReferenceNotAllowed"))
    assert cond["message"].startswith(
        f"spec.checkpoint.volume.claimName: PersistentVolumeClaim {ns}/db-data is not "
        f"labelled {REFERENCE_LABEL}=true"), cond
    assert f"kubectl label pvc db-data -n {ns} {REFERENCE_LABEL}=true" in cond["message"]
    cond = wait_for("the missing key", lambda: degraded("on-keys", "ReferenceNotFound"))
    assert f"Secret {ns}/team-keys has no key 'AWS_SECRET_ACCESS_KEY'" in cond["message"], cond
    kubectl("delete", "secret", "team-keys", "-n", ns)
    kubectl("create", "secret", "generic", "team-keys", "-n", ns,
            "--from-literal=AWS_ACCESS_KEY_ID=theirs", "--from-literal=AWS_SECRET_ACCESS_KEY=x")
    cond = wait_for("the Secret refused", lambda: degraded("on-keys", "ReferenceNotAllowed"))
    assert f"Secret {ns}/team-keys is not labelled" in cond["message"], cond
    for name in ("on-claim", "on-keys"):
        assert kubectl("get", "pod", f"{name}-driver", "-n", ns, check=False).returncode != 0
        assert "ReferenceNotAllowed" in reasons(kubectl, ns, name)

    kubectl("label", "pvc", "db-data", "-n", ns, f"{REFERENCE_LABEL}=true")
    kubectl("label", "secret", "team-keys", "-n", ns, f"{REFERENCE_LABEL}=true")
    pod = wait_for("the claim mounted", lambda: kubectl.json("get", "pod", "on-claim-driver",
                                                             "-n", ns))
    assert {"name": "checkpoint", "persistentVolumeClaim": {"claimName": "db-data"}} in pod[
        "spec"]["volumes"]
    pod = wait_for("the keys given", lambda: kubectl.json("get", "pod", "on-keys-driver",
                                                          "-n", ns))
    env = {e["name"]: e.get("valueFrom") for e in pod["spec"]["containers"][0]["env"]}
    assert env["AWS_SECRET_ACCESS_KEY"] == {"secretKeyRef": {
        "name": "team-keys", "key": "AWS_SECRET_ACCESS_KEY"}}


# --- policies ---------------------------------------------------------------------------------


def test_missing_policy_is_degraded_and_nothing_else_changes(
    kubectl: Tool, ns: str, controller: ControllerProc
) -> None:
    runners = runners_with(["nopolicy"])
    try:
        attach(kubectl, ns, runners, "nopolicy", policy="absent")
        st = wait_for("Degraded", lambda: (s := status(kubectl, ns, "nopolicy")).get(
            "phase") == "Degraded" and s)
        cond = next(c for c in st["conditions"] if c["type"] == "Degraded")
        assert cond["reason"] == "PolicyNotFound" and f"{ns}/absent" in cond["message"]
        assert cond["observedGeneration"] == 1
        assert "PolicyNotFound" in reasons(kubectl, ns, "nopolicy")
        time.sleep(3)
        assert sum(runners.counts()["nopolicy"].values()) == 0, "acted without a policy"
        # the policy appears: the job is evaluated at once (the policy watch re-queues it)
        apply(kubectl, {**FAST_POLICY, "metadata": {"name": "absent"}}, ns)
        wait_for("Running", lambda: status(kubectl, ns, "nopolicy").get("phase") == "Running")
    finally:
        runners.stop()


def test_an_attached_job_cannot_borrow_a_secret_or_name_any_url(
    kubectl: Tool, ns: str, controller: ControllerProc
) -> None:
    """Issue #15: the token goes only from a Secret meant for runners to an allowed host."""
    runners = runners_with(["borrow", "elsewhere"])
    try:
        kubectl("create", "secret", "generic", "db-password", "-n", ns,
                f"--from-literal=token={TOKEN}")  # a neighbour's Secret, not labelled
        attach(kubectl, ns, runners, "borrow", secret="db-password")
        apply(kubectl, attached_job("elsewhere", ns, "http://attacker.example:8081",
                                    runners.metrics_url("elsewhere")))
        for name, reason, text in (
            ("borrow", "TokenSecretNotAllowed", "Secret db-password is not labelled"),
            ("elsewhere", "RunnerUrlNotAllowed", "host 'attacker.example' is not one"),
        ):
            st = wait_for(f"{name} Degraded", lambda n=name: (s := status(kubectl, ns, n)).get(
                "phase") == "Degraded" and s)
            cond = next(c for c in st["conditions"] if c["type"] == "Degraded")
            assert cond["reason"] == reason and text in cond["message"], cond
            assert reason in reasons(kubectl, ns, name)
        time.sleep(2)
        assert sum(runners.counts()["borrow"].values()) == 0, "called with a borrowed token"
    finally:
        runners.stop()


# --- attached mode: scale out, in, Events, columns -------------------------------------------


def test_attached_job_scales_out_and_in_with_events(
    kubectl: Tool, ns: str, controller: ControllerProc
) -> None:
    runners = runners_with(["bursty"], period_seconds=60, burst_share=0.5, initial_executors=2,
                           state_partitions=16, scale_seconds=1.0)
    try:
        attach(kubectl, ns, runners, "bursty")
        out = {"ScaleOut", "RepartitionStateBound"}  # a stateful bottleneck takes the SEEP move
        wait_for("a scale-in and a scale-out", lambda: "ScaleIn" in (got := set(
            reasons(kubectl, ns, "bursty"))) and got & out, timeout=150)
        st = status(kubectl, ns, "bursty")
        assert st["lastDecision"]["reason"] and st["executorsDisplay"].count("/") == 1
        assert {e["kind"] for e in st["history"]["entries"]} >= {"action", "recommendation"}
        table = kubectl("get", "streamjobs", "bursty", "-n", ns).stdout.splitlines()
        row = dict(zip(table[0].split(), table[1].split(), strict=False))
        assert row["PHASE"] in ("Running", "Scaling", "Repartitioning"), row
        assert "/" in row["EXECUTORS"], row
        assert row["INPUT/S"] not in ("", "<none>")
        assert "ActionSucceeded" in reasons(kubectl, ns, "bursty")
        assert controller.metric("stream_autoscaler_controller_actions_total",
                                 outcome="started") >= 2
        counts = runners.counts()["bursty"]
        assert counts.get("executors", 0) >= 2, counts  # out (with or before the repartition), in
        assert counts.get("executors.duplicate", 0) == 0, counts
    finally:
        runners.stop()


# --- crash safety -----------------------------------------------------------------------------


def test_controller_killed_mid_action_next_instance_finishes_it_once(
    kubectl: Tool, ns: str, controller_kubeconfig: Path, tmp_path: Path
) -> None:
    runners = runners_with(["crash"], initial_executors=6, state_partitions=16,
                           scale_seconds=15.0, burst_share=0.0)
    first = ControllerProc(controller_kubeconfig, ns, tmp_path, identity="first").start()
    try:
        attach(kubectl, ns, runners, "crash")  # idle at 6 executors: a scale-in comes
        intent = wait_for("an intent in status", lambda: status(kubectl, ns, "crash").get(
            "intent"), timeout=90)
        wait_for("the runner to have it", lambda: runners.counts()["crash"].get("executors"))
        first.kill(signal.SIGKILL)  # mid-action: the runner is still scaling
        before = dict(runners.counts()["crash"])
        second = ControllerProc(controller_kubeconfig, ns, tmp_path, identity="second").start()
        try:
            wait_for("the intent to end", lambda: not status(kubectl, ns, "crash").get("intent"),
                     timeout=60)
            after = runners.counts()["crash"]
            assert after.get("executors") == before.get("executors") == 1, (before, after)
            got = reasons(kubectl, ns, "crash")
            assert "ActionResumed" in got and "ActionSucceeded" in got, got
            hist = status(kubectl, ns, "crash")["history"]["entries"]
            started = [e for e in hist if e["kind"] == "action"
                       and abs(e["time"] - intent["startedAt"]) < 1e-3]
            assert len(started) == 1, hist
        finally:
            second.stop()
    finally:
        first.kill()
        runners.stop()


def test_intent_never_received_is_sent_once_and_a_stale_one_abandoned(
    kubectl: Tool, ns: str, controller_kubeconfig: Path, tmp_path: Path
) -> None:
    """The controller died after writing the intent and before the runner heard of it."""
    runners = runners_with(["lost", "stale"], initial_executors=2, burst_share=0.0,
                           scale_seconds=1.0)
    try:
        for name in ("lost", "stale"):  # no controller runs yet
            attach(kubectl, ns, runners, name)
        now = time.time()
        for name, started in (("lost", now), ("stale", now - 3600)):
            patch = {"status": {"intent": {"actionId": f"test-{name}", "action": "scale",
                                           "targetExecutors": 3, "startedAt": started}}}
            kubectl("patch", "sj", name, "-n", ns, "--subresource=status", "--type=merge",
                    "-p", json.dumps(patch))
        c = ControllerProc(controller_kubeconfig, ns, tmp_path).start()
        try:
            for name in ("lost", "stale"):
                wait_for(f"{name}: intent ended", lambda n=name: "intent" not in status(
                    kubectl, ns, n) and status(kubectl, ns, n).get("lastDecision"), timeout=60)

            def ids(name: str) -> list[str]:
                st = RunnerClient(runners.url(name), TOKEN).status()
                return [a.id for a in st.recent_actions]

            assert ids("lost").count("test-lost") == 1  # sent once, under the intent's id
            assert "test-stale" not in ids("stale")  # too old: abandoned, never sent
            assert "ActionAbandoned" in reasons(kubectl, ns, "stale")
            assert "ActionSucceeded" in reasons(kubectl, ns, "lost")
        finally:
            c.stop()
    finally:
        runners.stop()


# --- leader election ------------------------------------------------------------------------


def test_two_instances_one_leader_and_failover(
    kubectl: Tool, ns: str, controller_kubeconfig: Path, tmp_path: Path
) -> None:
    runners = runners_with(["led"])
    a = ControllerProc(controller_kubeconfig, ns, tmp_path, identity="a", leader_elect=True)
    b = ControllerProc(controller_kubeconfig, ns, tmp_path, identity="b", leader_elect=True)
    lease = "stream-autoscaler-controller"
    kubectl("delete", "lease", lease, "-n", CONTROLLER_NS, "--ignore-not-found")
    try:
        a.start()
        b.start()
        attach(kubectl, ns, runners, "led")
        holder = wait_for("a leader", lambda: kubectl.json("get", "lease", lease, "-n",
                                                           CONTROLLER_NS)["spec"].get(
            "holderIdentity"))
        leader, standby = (a, b) if holder == "a" else (b, a)
        wait_for("status from the leader", lambda: status(kubectl, ns, "led").get(
            "lastDecision"))
        assert leader.metric("stream_autoscaler_controller_leader") == 1
        assert standby.metric("stream_autoscaler_controller_leader") == 0
        assert standby.metric("stream_autoscaler_controller_reconciles_total") == 0
        killed = time.monotonic()
        leader.kill(signal.SIGKILL)
        wait_for("failover", lambda: standby.metric("stream_autoscaler_controller_leader") == 1,
                 timeout=40, every=0.25)
        failover = time.monotonic() - killed
        assert failover <= 15 + 2 + 3, f"failover took {failover:.1f} s"  # lease + retry + slack
        seen = status(kubectl, ns, "led")["lastDecision"]["time"]
        wait_for("the new leader evaluates", lambda: status(kubectl, ns, "led")[
            "lastDecision"]["time"] > seen, timeout=30)
        print(f"leader failover: {failover:.1f} s after SIGKILL (lease 15 s)")
    finally:
        a.kill()
        b.kill()
        runners.stop()


# --- API-server weather: 409 and 410 -----------------------------------------------------------


def test_conflicts_are_retried(kubectl: Tool, ns: str, controller: ControllerProc) -> None:
    runners = runners_with(["contended"])
    stop = threading.Event()
    writes: list[int] = [0, 0]  # the other writer's [successes, failures]

    def meddle() -> None:
        # Another writer bumps the resourceVersion as fast as the API server takes it: a 409
        # needs its write to land between the controller's cache read and its PUT, a window of
        # a few milliseconds on a quiet machine. At 10 writes a second a loaded CI machine once
        # went 60 s without one.
        from kubernetes import client, config

        api = client.CustomObjectsApi(config.new_client_from_config(
            str(REPO / ".testbed" / "kubeconfig")))
        while not stop.is_set():
            try:
                api.patch_namespaced_custom_object_status(
                    "stream-autoscaler.io", "v1alpha1", ns, "streamjobs", "contended",
                    {"status": {"backlogRecords": time.time() % 1000}},
                    _content_type="application/merge-patch+json")
                writes[0] += 1
            except Exception:  # a 409 of our own is fine too
                writes[1] += 1
                stop.wait(0.01)

    try:
        attach(kubectl, ns, runners, "contended")
        wait_for("status", lambda: status(kubectl, ns, "contended").get("lastDecision"))
        meddlers = [threading.Thread(target=meddle, daemon=True) for _ in range(2)]
        for t in meddlers:
            t.start()
        try:
            wait_for("a conflict", lambda: controller.metric(
                "stream_autoscaler_controller_reconciles_total", result="conflict") > 0,
                timeout=90)
        except AssertionError as e:
            raise AssertionError(f"{e}; the other writer: {writes[0]} writes, "
                                 f"{writes[1]} refused") from None
        stop.set()
        for t in meddlers:
            t.join()
        seen = status(kubectl, ns, "contended")["lastDecision"]["time"]
        wait_for("evaluations after conflicts", lambda: status(kubectl, ns, "contended")[
            "lastDecision"]["time"] > seen, timeout=30)
    finally:
        stop.set()
        runners.stop()


def test_watch_gone_410_relists(kubectl: Tool, ns: str, testbed: Any) -> None:
    from kubernetes import config

    from controller.kube.api import KubeApi
    from controller.kube.informer import Informer

    api = KubeApi(config.new_client_from_config(str(testbed.dir / "kubeconfig")))
    config.load_kube_config(str(testbed.dir / "kubeconfig"))  # kubernetes.watch's default
    apply(kubectl, attached_job("first", ns, "http://127.0.0.1:1", "http://127.0.0.1:1/m"))
    seen: list[tuple[str, str]] = []
    restarts: list[str] = []
    inf = Informer("StreamJob", api.jobs(ns), lambda k, o: seen.append(
        (k, o["metadata"]["name"])), on_restart=restarts.append)
    inf.resource_version = "1"  # long compacted: the API server answers 410 Gone
    inf.start()
    try:
        wait_for("a relist after 410", lambda: "expired" in restarts and inf.get((ns, "first")))
        apply(kubectl, attached_job("second", ns, "http://127.0.0.1:1", "http://127.0.0.1:1/m"))
        wait_for("the watch after the relist", lambda: ("ADDED", "second") in seen)
    finally:
        inf.stop()


# --- deletion ----------------------------------------------------------------------------------


def test_delete_stops_the_job_at_a_batch_boundary_first(
    kubectl: Tool, ns: str, controller: ControllerProc
) -> None:
    runners = runners_with(["doomed"])
    try:
        attach(kubectl, ns, runners, "doomed")
        wait_for("the finalizer", lambda: kubectl.json("get", "sj", "doomed", "-n", ns)[
            "metadata"].get("finalizers"))
        kubectl("delete", "sj", "doomed", "-n", ns, "--wait=true", "--timeout=60s")
        assert runners.counts()["doomed"].get("stop") == 1
        assert runners.job("doomed").phase == "Stopped"
        stopped = [e for e in events(kubectl, ns, "doomed") if e["reason"] == "Stopped"]
        assert stopped and "stopped at a batch boundary" in stopped[0]["message"]
    finally:
        runners.stop()
