"""k8s/rbac/ against a real API server with RBAC on: the controller's and the Spark driver's
ServiceAccounts may do what they need and nothing else — asked both by impersonation
(`kubectl auth can-i --as`) and with a real ServiceAccount token from the TokenRequest API."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import yaml

from tests.integration.k8s.k8s_tier import REPO, Tool

pytestmark = pytest.mark.k8s

RBAC = REPO / "k8s" / "rbac"
CONTROLLER_NS = "stream-autoscaler-system"
CONTROLLER = f"system:serviceaccount:{CONTROLLER_NS}:stream-autoscaler"
DRIVER = "system:serviceaccount:default:stream-autoscaler-spark"

# (verb, resource, namespace or "" for all namespaces)
CONTROLLER_MAY = [
    ("list", "streamjobs.stream-autoscaler.io", ""),
    ("watch", "streamjobs.stream-autoscaler.io", ""),
    ("get", "scalingpolicies.stream-autoscaler.io", "jobs"),
    ("patch", "streamjobs.stream-autoscaler.io/status", "jobs"),
    ("update", "streamjobs.stream-autoscaler.io/status", "jobs"),
    ("update", "streamjobs.stream-autoscaler.io/finalizers", "jobs"),
    ("patch", "streamjobs.stream-autoscaler.io", "jobs"),
    ("create", "events", "jobs"),
    ("create", "events.events.k8s.io", "jobs"),
    ("create", "pods", "jobs"),
    ("delete", "pods", "jobs"),
    ("create", "services", "jobs"),
    ("create", "configmaps", "jobs"),
    ("create", "secrets", "jobs"),
    ("get", "secrets", "jobs"),
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
    ("create", "leases.coordination.k8s.io", "jobs"),
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
    ("watch", "pods", "default"),
    ("create", "services", "default"),
    ("create", "configmaps", "default"),
    ("create", "persistentvolumeclaims", "default"),
    ("deletecollection", "persistentvolumeclaims", "default"),
]
DRIVER_MAY_NOT = [
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

    def as_controller(*args: str, check: bool = True) -> object:
        return kubectl(f"--token={token}", *args, check=check)

    who = kubectl(f"--token={token}", "auth", "whoami", "-o", "json").stdout
    assert json.loads(who)["status"]["userInfo"]["username"] == CONTROLLER
    # allowed: read jobs, write their status, create a configmap and an event
    as_controller("get", "streamjobs", "-n", namespace)
    as_controller(
        "patch",
        "sj",
        "rbac",
        "-n",
        namespace,
        "--subresource=status",
        "--type=merge",
        "-p",
        '{"status": {"phase": "Running"}}',
    )
    as_controller("create", "configmap", "rbac-probe", "-n", namespace, "--from-literal=k=v")
    # denied: delete a job, read every secret, touch RBAC
    for args in (
        ("delete", "sj", "rbac", "-n", namespace),
        ("get", "secrets", "-n", namespace),
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
