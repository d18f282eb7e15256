"""k8s/rbac/ and the chart's namespaced mode against a real API server with RBAC on: the
controller's and the Spark driver's ServiceAccounts may do what they need and nothing else —
asked by impersonation (`kubectl auth can-i --as`, and `--list` compared with the verbs the
controller declares, controller/kube/api.py REQUIRED_PERMISSIONS), and with a real
ServiceAccount token from the TokenRequest API. Also the objects the controller builds for
least privilege (docs/security.md): driver and executor pods admitted by PodSecurity
`restricted` (and a pod without their security context refused), and the drivers'
NetworkPolicy accepted as built."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from tests.integration.k8s.k8s_tier import CHART, REPO, Tool

pytestmark = pytest.mark.k8s

RBAC = REPO / "k8s" / "rbac"
CONTROLLER_NS = "stream-autoscaler-system"
CONTROLLER = f"system:serviceaccount:{CONTROLLER_NS}:stream-autoscaler"
DRIVER = "system:serviceaccount:default:stream-autoscaler-spark"

# (verb, resource, namespace or "" for all namespaces)
CONTROLLER_MAY = [
    ("list", "streamjobs.stream-autoscaler.io", ""),
    ("watch", "streamjobs.stream-autoscaler.io", ""),
    ("watch", "scalingpolicies.stream-autoscaler.io", "jobs"),
    ("update", "streamjobs.stream-autoscaler.io/status", "jobs"),
    ("update", "streamjobs.stream-autoscaler.io/finalizers", "jobs"),
    ("patch", "streamjobs.stream-autoscaler.io", "jobs"),
    ("create", "events", "jobs"),
    ("create", "pods", "jobs"),
    ("delete", "pods", "jobs"),
    ("create", "services", "jobs"),
    ("patch", "configmaps", "jobs"),
    ("create", "secrets", "jobs"),
    ("get", "secrets", "jobs"),
    ("get", "persistentvolumeclaims", "jobs"),
    ("create", "networkpolicies.networking.k8s.io", "jobs"),
    ("create", "leases.coordination.k8s.io", CONTROLLER_NS),
    ("update", "leases.coordination.k8s.io", CONTROLLER_NS),
]
CONTROLLER_MAY_NOT = [
    ("create", "streamjobs.stream-autoscaler.io", "jobs"),
    ("update", "streamjobs.stream-autoscaler.io", "jobs"),
    ("delete", "streamjobs.stream-autoscaler.io", "jobs"),
    ("create", "scalingpolicies.stream-autoscaler.io", "jobs"),
    ("update", "scalingpolicies.stream-autoscaler.io", "jobs"),
    ("list", "secrets", "jobs"),
    ("watch", "secrets", ""),
    ("update", "secrets", "jobs"),
    ("delete", "secrets", "jobs"),
    ("list", "pods", "jobs"),
    ("patch", "pods", "jobs"),
    ("watch", "configmaps", ""),
    ("list", "persistentvolumeclaims", "jobs"),
    ("create", "persistentvolumeclaims", "jobs"),
    ("delete", "services", "jobs"),
    ("patch", "events", "jobs"),
    ("create", "events.events.k8s.io", "jobs"),
    ("get", "streamjobs.stream-autoscaler.io/status", "jobs"),
    ("patch", "streamjobs.stream-autoscaler.io/status", "jobs"),
    ("create", "leases.coordination.k8s.io", "jobs"),
    ("list", "leases.coordination.k8s.io", CONTROLLER_NS),
    ("patch", "leases.coordination.k8s.io", CONTROLLER_NS),
    ("create", "deployments.apps", "jobs"),
    ("create", "clusterroles.rbac.authorization.k8s.io", ""),
    ("create", "rolebindings.rbac.authorization.k8s.io", "jobs"),
    ("delete", "nodes", ""),
    ("create", "customresourcedefinitions.apiextensions.k8s.io", ""),
    ("create", "pods/exec", "jobs"),
    ("impersonate", "serviceaccounts", "jobs"),
]
DRIVER_MAY = [
    ("create", "pods", "default"),
    ("delete", "pods", "default"),
    ("deletecollection", "pods", "default"),
    ("get", "pods", "default"),
    ("list", "pods", "default"),
    ("watch", "pods", "default"),
]
DRIVER_MAY_NOT = [
    ("patch", "pods", "default"),
    ("update", "pods", "default"),
    ("create", "services", "default"),
    ("delete", "services", "default"),
    ("create", "configmaps", "default"),
    ("deletecollection", "configmaps", "default"),
    ("create", "persistentvolumeclaims", "default"),
    ("deletecollection", "persistentvolumeclaims", "default"),
    ("create", "pods", "kube-system"),
    ("list", "pods", ""),
    ("get", "secrets", "default"),
    ("create", "roles.rbac.authorization.k8s.io", "default"),
    ("list", "streamjobs.stream-autoscaler.io", "default"),
    ("patch", "streamjobs.stream-autoscaler.io/status", "default"),
    ("create", "deployments.apps", "default"),
    ("create", "pods/exec", "default"),
]


@pytest.fixture(scope="module")
def rbac_applied(kubectl: Tool, crds: list[str]) -> Iterator[None]:
    files = [str(RBAC / f) for f in ("controller.yaml", "spark-driver.yaml")]
    for f in files:
        kubectl("apply", "--server-side", "--force-conflicts", "-f", f)
    kubectl(
        "wait",
        "--for=create",
        "--timeout=30s",
        "-n",
        CONTROLLER_NS,
        "serviceaccount/stream-autoscaler",
    )
    yield
    # The chart creates the same cluster-scoped names; leave the cluster as we found it.
    for f in reversed(files):
        kubectl("delete", "--ignore-not-found", "--wait=false", "-f", f)


def can_i(kubectl: Tool, user: str, verb: str, resource: str, ns: str) -> bool:
    where = ["-n", ns] if ns else ["--all-namespaces"]
    # "pods/exec" would read as the pod named exec: a subresource needs its own flag.
    resource, _, sub = resource.partition("/")
    subresource = [f"--subresource={sub}"] if sub else []
    out = kubectl(
        "auth", "can-i", verb, resource, *subresource, *where, f"--as={user}", check=False
    )
    assert out.stdout.strip() in ("yes", "no"), out.stderr
    return out.stdout.strip() == "yes"


def _ids(cases: list[tuple[str, str, str]]) -> list[str]:
    def short(resource: str) -> str:
        name, _, sub = resource.partition("/")
        return name.split(".")[0] + (f"/{sub}" if sub else "")

    return [f"{verb}-{short(r)}-{ns or 'all'}" for verb, r, ns in cases]


@pytest.mark.parametrize(("verb", "resource", "ns"), CONTROLLER_MAY, ids=_ids(CONTROLLER_MAY))
def test_controller_may(
    kubectl: Tool, rbac_applied: None, verb: str, resource: str, ns: str
) -> None:
    assert can_i(kubectl, CONTROLLER, verb, resource, ns)


@pytest.mark.parametrize(
    ("verb", "resource", "ns"), CONTROLLER_MAY_NOT, ids=_ids(CONTROLLER_MAY_NOT)
)
def test_controller_may_not(
    kubectl: Tool, rbac_applied: None, verb: str, resource: str, ns: str
) -> None:
    assert not can_i(kubectl, CONTROLLER, verb, resource, ns)


@pytest.mark.parametrize(("verb", "resource", "ns"), DRIVER_MAY, ids=_ids(DRIVER_MAY))
def test_spark_driver_may(
    kubectl: Tool, rbac_applied: None, verb: str, resource: str, ns: str
) -> None:
    assert can_i(kubectl, DRIVER, verb, resource, ns)


@pytest.mark.parametrize(("verb", "resource", "ns"), DRIVER_MAY_NOT, ids=_ids(DRIVER_MAY_NOT))
def test_spark_driver_may_not(
    kubectl: Tool, rbac_applied: None, verb: str, resource: str, ns: str
) -> None:
    assert not can_i(kubectl, DRIVER, verb, resource, ns)


def test_controller_token_does_its_job_and_no_more(
    kubectl: Tool, rbac_applied: None, namespace: str
) -> None:
    """With a real token (TokenRequest API), not impersonation: the authenticator, the
    ServiceAccount and the bindings all take part."""
    job = yaml.safe_load((REPO / "k8s" / "samples" / "streamjob-burst.yaml").read_text())
    job["metadata"] = {"name": "rbac", "namespace": namespace}
    kubectl("apply", "-f", "-", input=json.dumps(job))
    token = kubectl(
        "create", "token", "stream-autoscaler", "-n", CONTROLLER_NS, "--duration=10m"
    ).stdout.strip()
    assert token.count(".") == 2, "not a JWT"

    def as_controller(*args: str, check: bool = True, input: str | None = None) -> object:
        return kubectl(f"--token={token}", *args, check=check, input=input)

    who = kubectl(f"--token={token}", "auth", "whoami", "-o", "json").stdout
    assert json.loads(who)["status"]["userInfo"]["username"] == CONTROLLER
    # allowed: read jobs, write their status, create a configmap and an event
    as_controller("get", "streamjobs", "-n", namespace)
    current = kubectl.json("get", "sj", "rbac", "-n", namespace)
    current["status"] = {"phase": "Running"}
    as_controller("replace", "--subresource=status", "-f", "-", input=json.dumps(current))
    as_controller("create", "configmap", "rbac-probe", "-n", namespace, "--from-literal=k=v")
    # denied: delete a job, read every secret, patch status blindly, touch RBAC
    for args in (
        ("delete", "sj", "rbac", "-n", namespace),
        ("get", "secrets", "-n", namespace),
        ("patch", "sj", "rbac", "-n", namespace, "--subresource=status", "--type=merge",
         "-p", '{"status": {"phase": "Failed"}}'),
        ("create", "namespace", "rbac-escape"),
        (
            "create",
            "clusterrolebinding",
            "rbac-escape",
            "--clusterrole=cluster-admin",
            f"--serviceaccount={CONTROLLER_NS}:stream-autoscaler",
        ),
    ):
        result = kubectl(f"--token={token}", *args, check=False)
        assert result.returncode != 0 and "forbidden" in result.stderr.lower(), (args, result)


# --- exactly the declared verbs: `kubectl auth can-i --list` ----------------------------------

Rules = dict[str, set[str]]


def can_i_list(kubectl: Tool, user: str, ns: str) -> Rules:
    """Resource rules that apply to ``user`` in ``ns`` (cluster-wide ones included):
    kubectl's resource spelling (``plural.group/sub``) -> verbs."""
    out = kubectl("auth", "can-i", "--list", "-n", ns, f"--as={user}", "--no-headers").stdout
    rules: Rules = {}
    for line in out.splitlines():
        if not line.strip() or line.startswith(" "):
            continue  # non-resource URLs
        resource = line.split()[0]
        verbs = re.findall(r"\[([^\]]*)\]\s*$", line)[0].split()
        rules.setdefault(resource, set()).update(verbs)
    return rules


def declared(where: str) -> Rules:
    from controller.kube.api import required_rules

    out: Rules = {}
    for (group, resource), verbs in required_rules(where).items():  # type: ignore[arg-type]
        plural, _, sub = resource.partition("/")
        name = f"{plural}.{group}" if group else plural
        out[name + (f"/{sub}" if sub else "")] = set(verbs)
    return out


def beyond_baseline(kubectl: Tool, user: str, ns: str) -> Rules:
    """What ``user`` may do in ``ns`` beyond what every authenticated ServiceAccount may
    (self-reviews, discovery, cluster trust bundles: the API server's default bindings)."""
    nobody = f"system:serviceaccount:{ns}:nobody-{uuid.uuid4().hex[:6]}"
    base = can_i_list(kubectl, nobody, ns)
    got = can_i_list(kubectl, user, ns)
    return {r: v - base.get(r, set()) for r, v in got.items() if v - base.get(r, set())}


def merged(*rules: Rules) -> Rules:
    out: Rules = {}
    for r in rules:
        for k, v in r.items():
            out.setdefault(k, set()).update(v)
    return out


def test_cluster_mode_grants_exactly_the_declared_verbs(
    kubectl: Tool, rbac_applied: None
) -> None:
    assert beyond_baseline(kubectl, CONTROLLER, "jobs") == declared("jobs")
    assert beyond_baseline(kubectl, CONTROLLER, CONTROLLER_NS) == merged(
        declared("jobs"), declared("lease"))
    assert beyond_baseline(kubectl, DRIVER, "default") == {
        "pods": {"get", "list", "watch", "create", "delete", "deletecollection"}}
    assert beyond_baseline(kubectl, DRIVER, "jobs") == {}


@pytest.fixture(scope="module")
def namespaced_release(helm: Tool, kubectl: Tool, crds: list[str]) -> Iterator[tuple[str, str]]:
    """The chart with rbac.scope=namespaced: the controller in one namespace, jobs in another."""
    ctl_ns, jobs_ns, release = "sa-nsmode", "sa-nsmode-jobs", "sa-nsmode"
    helm("uninstall", release, "-n", ctl_ns, "--wait", check=False)
    kubectl("create", "namespace", jobs_ns, check=False)
    helm("install", release, str(CHART), "-n", ctl_ns, "--create-namespace", "--wait",
         "--timeout=2m", "--set", "replicaCount=0", "--set", "rbac.scope=namespaced",
         "--set", f"controller.watchNamespace={jobs_ns}")
    yield ctl_ns, jobs_ns
    helm("uninstall", release, "-n", ctl_ns, "--wait", check=False)
    for ns in (ctl_ns, jobs_ns):
        kubectl("delete", "namespace", ns, "--wait=false", check=False)


def test_namespaced_mode_grants_the_declared_verbs_in_one_namespace_only(
    kubectl: Tool, namespaced_release: tuple[str, str], namespace: str
) -> None:
    ctl_ns, jobs_ns = namespaced_release
    user = f"system:serviceaccount:{ctl_ns}:sa-nsmode-stream-autoscaler"
    assert beyond_baseline(kubectl, user, jobs_ns) == declared("jobs")
    assert beyond_baseline(kubectl, user, ctl_ns) == declared("lease")
    # nothing cluster-wide: another namespace shows only what every ServiceAccount has
    assert beyond_baseline(kubectl, user, namespace) == {}
    assert not can_i(kubectl, user, "list", "streamjobs.stream-autoscaler.io", "")
    driver = f"system:serviceaccount:{jobs_ns}:stream-autoscaler-spark"
    assert beyond_baseline(kubectl, driver, jobs_ns) == {
        "pods": {"get", "list", "watch", "create", "delete", "deletecollection"}}
    dep = kubectl.json("get", "deployment", "sa-nsmode-stream-autoscaler", "-n", ctl_ns)
    args = dep["spec"]["template"]["spec"]["containers"][0]["args"]
    assert f"--namespace={jobs_ns}" in args


# --- PodSecurity "restricted" and the drivers' NetworkPolicy ------------------------------------

OWNER = {"apiVersion": "stream-autoscaler.io/v1alpha1", "kind": "StreamJob",
         "metadata": {"name": "psa", "uid": "00000000-0000-0000-0000-000000000001"}}


@pytest.fixture
def restricted_ns(kubectl: Tool, namespace: str) -> str:
    kubectl("label", "namespace", namespace, "pod-security.kubernetes.io/enforce=restricted",
            "pod-security.kubernetes.io/enforce-version=latest")
    kubectl("create", "serviceaccount", "stream-autoscaler-spark", "-n", namespace)
    return namespace


def _job(ns: str) -> tuple[dict[str, Any], Any]:
    from contracts.streamjob import StreamJob

    doc = yaml.safe_load((REPO / "k8s" / "samples" / "streamjob-burst.yaml").read_text())
    doc["metadata"] = {**OWNER["metadata"], "namespace": ns}
    doc["spec"]["checkpoint"] = {"location": "/checkpoints/psa", "volume": {
        "claimName": "checkpoints", "mountPath": "/checkpoints"}}
    return doc, StreamJob.model_validate(doc)


def _executor_pod(ns: str) -> dict[str, Any]:
    """Spark's executor pod as Spark builds it on our template: Spark fills in name, labels,
    image, args, env, ports, resources and its volumes; the template's security stays."""
    from controller.kube import resources

    pod = resources.executor_pod_template(resources.Names("psa", ns))
    pod["metadata"] = {"name": "psa-exec-1", "namespace": ns, "labels": {
        "spark-role": "executor", "spark-exec-id": "1", resources.JOB_LABEL: "psa"}}
    spec = pod["spec"]
    spec["restartPolicy"] = "Never"
    spec["serviceAccountName"] = "stream-autoscaler-spark"
    spec["volumes"] = [
        {"name": "spark-local-dir-1", "emptyDir": {}},
        {"name": "checkpoint", "persistentVolumeClaim": {"claimName": "checkpoints"}},
    ]
    c = spec["containers"][0]
    c.update({
        "image": "stream-autoscaler:dev", "args": ["executor"],
        "env": [{"name": "SPARK_EXECUTOR_ID", "value": "1"},
                {"name": "_SPARK_AUTH_SECRET", "value": "generated-by-the-driver"}],
        "ports": [{"name": "blockmanager", "containerPort": 7079}],
        "resources": {"requests": {"cpu": "1", "memory": "1408Mi"},
                      "limits": {"memory": "1408Mi"}},
        "volumeMounts": [{"name": "spark-local-dir-1", "mountPath": "/var/data/spark-1"},
                         {"name": "checkpoint", "mountPath": "/checkpoints"}],
    })
    return pod


def _dry_run(kubectl: Tool, doc: dict[str, Any], check: bool = True) -> Any:
    return kubectl("create", "--dry-run=server", "-f", "-", input=json.dumps(doc), check=check)


def test_driver_and_executor_pods_meet_restricted(kubectl: Tool, restricted_ns: str) -> None:
    from controller.kube import resources
    from controller.kube.settings import ManagedSettings

    obj, job = _job(restricted_ns)
    driver = resources.driver_pod(obj, job, ManagedSettings(), executors=2, max_executors=4)
    for pod in (driver, _executor_pod(restricted_ns)):
        out = _dry_run(kubectl, pod)
        assert "created (server dry run)" in out.stdout, out


def test_a_pod_without_the_security_context_is_refused_there(
    kubectl: Tool, restricted_ns: str
) -> None:
    pod = _executor_pod(restricted_ns)
    del pod["spec"]["securityContext"]
    del pod["spec"]["containers"][0]["securityContext"]
    out = _dry_run(kubectl, pod, check=False)
    assert out.returncode != 0 and 'violates PodSecurity "restricted' in out.stderr, out
    for missing in ("allowPrivilegeEscalation", "capabilities", "runAsNonRoot", "seccompProfile"):
        assert missing in out.stderr


def test_the_drivers_network_policy_is_accepted(kubectl: Tool, namespace: str) -> None:
    from controller.kube import network_policy as netpol
    from controller.kube.settings import ManagedSettings

    obj, _ = _job(namespace)
    np = netpol.network_policy(obj, ManagedSettings(), netpol.DriverIngress.defaults(
        CONTROLLER_NS))
    np["metadata"].pop("ownerReferences")  # no such StreamJob here: keep the GC away
    kubectl("create", "-f", "-", input=json.dumps(np))
    got = kubectl.json("get", "networkpolicy", np["metadata"]["name"], "-n", namespace)
    assert got["spec"]["podSelector"] == np["spec"]["podSelector"]
    assert len(got["spec"]["ingress"]) == 3
