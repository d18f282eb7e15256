"""Tenancy by design, against the real API server of the test bed (RBAC, PodSecurity and
ValidatingAdmissionPolicy on): a Spark driver runs its job author's code with the drivers'
ServiceAccount, so everything that ServiceAccount may do is tried here as a hostile driver
would, with a token the API server bound to the driver's pod (what the kubelet mounts in it).

RBAC gives the drivers pods in their namespace, and cannot tell one job's pods from another's;
the chart's admission policy (``templates/spark-driver-admission.yaml``) does: a driver creates
only executors of its own job, shaped as Spark builds them on our template, and deletes only
those. The chart never puts jobs in the controller's namespace (``test_helm.py``), and a job's
Spark RPC secret is a file from its own Secret, never a value in a pod (``tests/unit/kube/
test_security.py::test_the_rpc_secret_is_a_file_never_a_pod_env``). docs/security.md.
"""

from __future__ import annotations

import copy
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.k8s.controller_env import token_kubeconfig
from tests.integration.k8s.k8s_tier import CHART, Tool

pytestmark = pytest.mark.k8s

RELEASE, CTL_NS = "sa-tenancy", "sa-tenancy-system"
JOBS = f"sa-tenancy-jobs-{uuid.uuid4().hex[:6]}"  # the chart keeps it; a rerun makes its own
IMAGE = "stream-autoscaler:tenancy"
DRIVER_SA = "stream-autoscaler-spark"
POLICY_SAYS = f"ValidatingAdmissionPolicy '{RELEASE}-stream-autoscaler-{CTL_NS}-spark-drivers'"
RESTRICTED = {"runAsNonRoot": True, "runAsUser": 10001,
              "seccompProfile": {"type": "RuntimeDefault"}}
CONTAINER_SC = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


def pod(name: str, job: str, role: str, **spec: Any) -> dict[str, Any]:
    """A pod as the controller (driver) or Spark (executor) makes it, in the restricted shape."""
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": JOBS,
                     "labels": {"stream-autoscaler.io/job": job, "spark-role": role}},
        "spec": {"securityContext": RESTRICTED, "restartPolicy": "Never",
                 "containers": [{"name": "c", "image": IMAGE, "securityContext": CONTAINER_SC}],
                 **spec},
    }


@pytest.fixture(scope="module")
def jobs_ns(helm: Tool, kubectl: Tool, crds: list[str]) -> Iterator[str]:
    """The chart (no controller pod) with its job namespace made by the chart, a victim job's
    driver, executor and Secrets, and a hostile job's driver pod."""
    helm("uninstall", RELEASE, "-n", CTL_NS, "--wait", check=False)
    helm("install", RELEASE, str(CHART), "-n", CTL_NS, "--create-namespace", "--wait",
         "--timeout=2m", "--set", "replicaCount=0", "--set", f"jobNamespaces={{{JOBS}}}",
         "--set", "image.tag=tenancy")
    kubectl("wait", "--for=create", "--timeout=60s", "-n", JOBS,
            f"serviceaccount/{DRIVER_SA}", "serviceaccount/default")
    for name in ("victim-spark-auth", "victim-control-token"):
        kubectl("create", "secret", "generic", name, "-n", JOBS, "--from-literal=secret=x")
    for doc in (pod("victim-driver", "victim", "driver", serviceAccountName=DRIVER_SA),
                pod("victim-exec-1", "victim", "executor", automountServiceAccountToken=False),
                pod("evil-driver", "evil", "driver", serviceAccountName=DRIVER_SA)):
        kubectl("create", "-f", "-", input=json.dumps(doc))
    yield JOBS
    helm("uninstall", RELEASE, "-n", CTL_NS, "--wait", check=False)
    for ns in (JOBS, CTL_NS):
        kubectl("delete", "namespace", ns, "--wait=false", check=False)


@pytest.fixture(scope="module")
def evil(kubectl: Tool, jobs_ns: str, tool_env: dict[str, str],
         tmp_path_factory: pytest.TempPathFactory) -> Tool:
    """kubectl as the hostile driver: the drivers' ServiceAccount, its token bound to the
    ``evil-driver`` pod (the API server names that pod in the request's user info)."""
    uid = kubectl.json("get", "pod", "evil-driver", "-n", jobs_ns)["metadata"]["uid"]
    token = kubectl("create", "token", DRIVER_SA, "-n", jobs_ns, "--bound-object-kind=Pod",
                    "--bound-object-name=evil-driver", f"--bound-object-uid={uid}").stdout
    path = token_kubeconfig(tool_env, token, tmp_path_factory.mktemp("evil") / "kubeconfig")
    return Tool(kubectl.path, {**tool_env, "KUBECONFIG": str(path)})


def own_executor(kubectl: Tool, name: str = "evil-exec-1") -> dict[str, Any]:
    """An executor as Spark builds it for the job ``evil`` on our template: owned by the
    driver pod, the default ServiceAccount without a token, the job's RPC secret mounted."""
    driver = kubectl.json("get", "pod", "evil-driver", "-n", JOBS)["metadata"]
    doc = pod(name, "evil", "executor", automountServiceAccountToken=False, volumes=[
        {"name": "spark-local-dir-1", "emptyDir": {}},
        {"name": "spark-auth", "secret": {"secretName": "evil-spark-auth"}}])
    doc["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod",
                                           "name": "evil-driver", "uid": driver["uid"],
                                           "controller": True}]
    return doc


def _with(doc: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    out = copy.deepcopy(doc)
    *keys, last = path.split(".")
    node = out
    for k in keys:
        node = node[int(k)] if isinstance(node, list) else node[k]
    node[last] = value
    return out


ESCALATIONS: list[tuple[str, str, Any, str]] = [
    # the controller's ServiceAccount is not in the job namespace at all: the ServiceAccount
    # admission refuses before the policy (the chart never runs jobs beside the controller)
    ("run as the controller's ServiceAccount", "spec.serviceAccountName",
     f"{RELEASE}-stream-autoscaler", f'serviceaccount "{RELEASE}-stream-autoscaler" not found'),
    ("run as the drivers' ServiceAccount", "spec.serviceAccountName", DRIVER_SA,
     "default ServiceAccount"),
    ("run with an API token", "spec.automountServiceAccountToken", True, "without an API token"),
    ("pose as another job's executor", "metadata.labels",
     {"stream-autoscaler.io/job": "victim", "spark-role": "executor"}, "its own job's executors"),
    ("start a pod that is no executor", "metadata.labels",
     {"stream-autoscaler.io/job": "evil", "spark-role": "driver"}, "its own job's executors"),
    ("an executor no driver owns", "metadata.ownerReferences", None, "owned by its driver pod"),
    ("mount another job's RPC secret", "spec.volumes",
     [{"name": "s", "secret": {"secretName": "victim-spark-auth"}}], "evil-spark-auth"),
    # PodSecurity `restricted` (the chart's label on the namespace) refuses it first
    ("mount the node's filesystem", "spec.volumes",
     [{"name": "h", "hostPath": {"path": "/"}}], "hostPath"),
    ("read another job's control token into env", "spec.containers.0.env",
     [{"name": "T", "valueFrom": {"secretKeyRef": {"name": "victim-control-token",
                                                   "key": "secret"}}}], "control"),
    ("take a whole Secret into env", "spec.containers.0.envFrom",
     [{"secretRef": {"name": "victim-spark-auth"}}], "no whole Secret"),
    ("run another image", "spec.containers.0.image", "evil.example/miner:1",
     "the controller's image"),
    ("pick its node", "spec.nodeName", "kwok-node-0", "never on a chosen node"),
]


@pytest.mark.parametrize("what,path,value,says", ESCALATIONS, ids=[e[0] for e in ESCALATIONS])
def test_a_hostile_driver_cannot(kubectl: Tool, evil: Tool, what: str, path: str, value: Any,
                                 says: str) -> None:
    doc = own_executor(kubectl, "evil-exec-x")
    if value is None:
        doc["metadata"].pop(path.rsplit(".", 1)[1])
    else:
        doc = _with(doc, path, value)
    out = evil("create", "-f", "-", input=json.dumps(doc), check=False)
    assert out.returncode != 0, f"{what}: created"
    assert says in out.stderr, out.stderr
    assert POLICY_SAYS in out.stderr or "not found" in says or (
        'violates PodSecurity "restricted' in out.stderr), out.stderr


def test_a_driver_creates_and_deletes_its_own_executors_only(kubectl: Tool, evil: Tool) -> None:
    doc = own_executor(kubectl)
    out = evil("create", "-f", "-", input=json.dumps(doc), check=False)
    assert out.returncode == 0, out.stderr  # the positive control: Spark's own executors pass
    for victim in ("victim-driver", "victim-exec-1", "evil-driver"):
        out = evil("delete", "pod", victim, "-n", JOBS, "--wait=false", check=False)
        assert out.returncode != 0 and POLICY_SAYS in out.stderr, (victim, out.stderr)
    # a DELETE on the whole collection reaches each pod's admission: only its own go
    evil("delete", "pods", "--all", "-n", JOBS, "--wait=false", check=False)
    left = {p["metadata"]["name"] for p in kubectl.json("get", "pods", "-n", JOBS)["items"]
            if not p["metadata"].get("deletionTimestamp")}
    assert {"victim-driver", "victim-exec-1", "evil-driver"} <= left
    assert "evil-exec-1" not in left


def test_outside_its_namespace_and_without_a_pod_bound_token_nothing(
    kubectl: Tool, evil: Tool, tool_env: dict[str, str], tmp_path: Path
) -> None:
    out = evil("create", "-f", "-", input=json.dumps(
        {**own_executor(kubectl), "metadata": {"name": "x", "namespace": CTL_NS}}), check=False)
    assert out.returncode != 0 and "forbidden" in out.stderr, out.stderr  # RBAC
    for verb in (("get", "secrets", "-n", JOBS), ("get", "pods", "-n", CTL_NS)):
        assert evil(*verb, check=False).returncode != 0, verb
    # the ServiceAccount's token not bound to a driver pod (a token a driver cannot mint:
    # no serviceaccounts/token verb) is held to nothing
    loose = kubectl("create", "token", DRIVER_SA, "-n", JOBS).stdout
    who = Tool(kubectl.path, {**tool_env, "KUBECONFIG": str(
        token_kubeconfig(tool_env, loose, tmp_path / "kubeconfig"))})
    out = who("create", "-f", "-", input=json.dumps(own_executor(kubectl, "e2")), check=False)
    assert out.returncode != 0 and "a driver pod's own token" in out.stderr, out.stderr
    assert evil("create", "token", DRIVER_SA, "-n", JOBS, check=False).returncode != 0
