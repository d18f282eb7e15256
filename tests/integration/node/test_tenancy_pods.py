"""A hostile driver on the real node: a pod with the Spark drivers' ServiceAccount (the token the
kubelet mounts, bound to the pod) runs a script that tries every escalation a job author's code
in a driver could, and reports what the API server answered. Beside it, another job's driver
and executor and its Secrets. The chart (no controller pod needed) is installed in its own
namespace, the jobs in this one: the drivers' admission policy, RBAC and PodSecurity decide.

The same table against the API server alone, with more rows: tests/integration/k8s/
test_tenancy.py. docs/security.md."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.integration.k8s.k8s_tier import Tool
from tests.integration.node.conftest import RealNode, run_pod
from tests.integration.node.pods import Story, install, overlay_values, uninstall

HOSTILE = r"""
import json, os
from kubernetes import client, config
from kubernetes.client.rest import ApiException

config.load_incluster_config()
api, ns, me = client.CoreV1Api(), os.environ["NS"], os.environ["POD_NAME"]
uid = api.read_namespaced_pod(me, ns).metadata.uid
image = os.environ["IMAGE"]
sc = {"runAsNonRoot": True, "runAsUser": 10001, "seccompProfile": {"type": "RuntimeDefault"}}
csc = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}

def executor(name, job="evil", **over):
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": name, "labels": {"stream-autoscaler.io/job": job,
                                                 "spark-role": "executor"},
                        "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": me,
                                             "uid": uid, "controller": True}]},
           "spec": {"automountServiceAccountToken": False, "securityContext": sc,
                    "restartPolicy": "Never", "nodeSelector": json.loads(os.environ["SEL"]),
                    "tolerations": json.loads(os.environ["TOL"]),
                    "containers": [{"name": "c", "image": image, "securityContext": csc,
                                    "command": ["sleep", "30"]}]}}
    pod["spec"].update(over.pop("spec", {}))
    pod["metadata"].update(over.pop("metadata", {}))
    return pod

def attempt(what, fn):
    try:
        fn()
        out[what] = "ALLOWED"
    except ApiException as e:
        out[what] = f"refused {e.status}: {json.loads(e.body).get('message', '')[:300]}"

out = {}
ctl_sa = os.environ["CONTROLLER_SA"]
attempt("pod as the controller's ServiceAccount", lambda: api.create_namespaced_pod(
    ns, executor("e1", spec={"serviceAccountName": ctl_sa})))
attempt("pod in the controller's namespace", lambda: api.create_namespaced_pod(
    os.environ["CTL_NS"], executor("e2", spec={"serviceAccountName": ctl_sa})))
attempt("pose as the victim's executor", lambda: api.create_namespaced_pod(
    ns, executor("e3", job="victim")))
attempt("mount the victim's RPC secret", lambda: api.create_namespaced_pod(ns, executor(
    "e4", spec={"volumes": [{"name": "s", "secret": {"secretName": "victim-spark-auth"}}]})))
attempt("mount the node's /", lambda: api.create_namespaced_pod(ns, executor(
    "e5", spec={"volumes": [{"name": "h", "hostPath": {"path": "/"}}]})))
attempt("delete the victim's driver", lambda: api.delete_namespaced_pod("victim-driver", ns))
attempt("delete every pod", lambda: api.delete_collection_namespaced_pod(ns))
attempt("read a Secret", lambda: api.read_namespaced_secret("victim-spark-auth", ns))
pods = api.list_namespaced_pod(ns).items
out["rpc secret values seen in pods"] = sorted(
    e.name for p in pods for c in p.spec.containers for e in (c.env or [])
    if e.value is not None and "AUTH" in e.name)
attempt("own executor", lambda: api.create_namespaced_pod(ns, executor("evil-exec-1")))
attempt("delete own executor", lambda: api.delete_namespaced_pod("evil-exec-1", ns))
print(json.dumps(out))
"""


def test_a_hostile_driver_script_is_refused_every_escalation(
    kubectl: Tool, helm: Tool, crds: list[str], real_node: RealNode, image: str, ns: str,
    tmp_path: Path,
) -> None:
    story = Story(kubectl, ns, tmp_path, "evil")
    try:
        install(helm, story, overlay_values(real_node, ns, tmp_path, replicas=0), "sa")
        sel = {"kubernetes.io/hostname": real_node.name}
        tol = [{"key": real_node.taint_key, "operator": "Exists", "effect": "NoSchedule"}]
        kubectl("create", "secret", "generic", "victim-spark-auth", "-n", ns,
                "--from-literal=secret=neighbour")
        victim = real_node.pod("victim-driver", containers=[
            {"name": "c", "image": image, "imagePullPolicy": "Never",
             "command": ["sleep", "300"]}])
        victim["metadata"]["labels"] = {"stream-autoscaler.io/job": "victim",
                                        "spark-role": "driver"}
        kubectl("create", "-n", ns, "-f", "-", input=json.dumps(victim))
        env: list[dict[str, Any]] = [
            {"name": "NS", "value": ns}, {"name": "IMAGE", "value": image},
            {"name": "CTL_NS", "value": story.ctl_ns},
            {"name": "CONTROLLER_SA", "value": "sa-stream-autoscaler"},
            {"name": "SEL", "value": json.dumps(sel)}, {"name": "TOL", "value": json.dumps(tol)},
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]
        evil = real_node.pod("evil-driver", serviceAccountName="stream-autoscaler-spark",
                             containers=[{"name": "driver", "image": image,
                                          "imagePullPolicy": "Never",
                                          "command": ["python", "-c", HOSTILE], "env": env}])
        evil["metadata"]["labels"] = {"stream-autoscaler.io/job": "evil", "spark-role": "driver"}
        _, logs = run_pod(kubectl, ns, evil, timeout=180)
        got = json.loads(logs.strip().splitlines()[-1])
        print(json.dumps(got, indent=1))
        refused = {k: v for k, v in got.items() if str(v).startswith("refused")}
        assert set(refused) == {
            "pod as the controller's ServiceAccount", "pod in the controller's namespace",
            "pose as the victim's executor", "mount the victim's RPC secret",
            "mount the node's /", "delete the victim's driver", "delete every pod",
            "read a Secret"}, got
        assert "not found" in refused["pod as the controller's ServiceAccount"]  # not here
        assert "ValidatingAdmissionPolicy" in refused["mount the victim's RPC secret"]
        assert "ValidatingAdmissionPolicy" in refused["delete the victim's driver"]
        assert got["rpc secret values seen in pods"] == []
        assert got["own executor"] == got["delete own executor"] == "ALLOWED", got
        assert kubectl.json("get", "pod", "victim-driver", "-n", ns)["metadata"].get(
            "deletionTimestamp") is None
    finally:
        uninstall(helm, story, "sa")
