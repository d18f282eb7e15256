"""The Helm chart: lint, what it renders (the same RBAC as k8s/rbac/ and exactly the verbs the
controller declares, in cluster and namespaced mode; the repo's policies as its default
ScalingPolicies; a hardened Deployment), and install / upgrade / uninstall against
the test bed, where kwok runs the controller's pod (marks it Running; nothing executes)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration.k8s.k8s_tier import CHART, REPO, Tool

pytestmark = pytest.mark.k8s

Doc = dict[str, Any]


def render(helm: Tool, *args: str) -> list[Doc]:
    out = helm(
        "template", "stream-autoscaler", str(CHART), "--namespace", "sa-system", *args
    ).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def by_kind(docs: list[Doc], kind: str) -> list[Doc]:
    return [d for d in docs if d["kind"] == kind]


def test_lint_is_clean(helm_offline: Tool) -> None:
    out = helm_offline("lint", "--strict", str(CHART))
    assert "0 chart(s) failed" in out.stdout
    assert "[WARNING]" not in out.stdout and "[ERROR]" not in out.stdout, out.stdout


def test_schema_rejects_unknown_values(helm_offline: Tool) -> None:
    bad = helm_offline("template", "x", str(CHART), "--set", "controller.healthport=1", check=False)
    assert bad.returncode != 0 and "healthport" in bad.stderr


def test_default_policies_are_the_repos(helm_offline: Tool) -> None:
    rendered = {d["metadata"]["name"]: d for d in by_kind(render(helm_offline), "ScalingPolicy")}
    repo = {}
    for f in sorted((REPO / "policies").glob("*.yaml")):
        doc = yaml.safe_load(f.read_text())
        repo[doc["metadata"]["name"]] = doc
    assert repo, "policies/*.yaml missing"
    assert set(rendered) == set(repo)
    for name, doc in repo.items():
        assert rendered[name]["apiVersion"] == doc["apiVersion"]
        assert rendered[name]["spec"] == doc["spec"], (
            f"the chart's policy {name} differs from policies/: "
            "run python3 hack/tools/sync_chart_policies.py"
        )
        assert rendered[name]["metadata"]["namespace"] == "stream-jobs"


def test_policies_can_be_overridden_added_and_dropped(helm_offline: Tool, tmp_path: Path) -> None:
    values = tmp_path / "v.yaml"
    values.write_text(
        yaml.safe_dump(
            {
                "policies": {
                    "cost-saver": None,
                    "default": {"executors": {"max": 20}},
                    "mine": {"mode": "recommend"},
                },
                "jobNamespaces": ["jobs-a", "jobs-b"],
            }
        )
    )
    got = {
        (d["metadata"]["namespace"], d["metadata"]["name"]): d["spec"]
        for d in by_kind(render(helm_offline, "-f", str(values)), "ScalingPolicy")
    }
    assert {n for _, n in got} == {"default", "latency-first", "half-core-executors", "mine"}
    assert {ns for ns, _ in got} == {"jobs-a", "jobs-b"}
    assert got[("jobs-a", "default")]["executors"] == {"min": 1, "max": 20}
    assert got[("jobs-b", "mine")] == {"mode": "recommend"}


def _rules(docs: list[Doc], kind: str) -> list[list[Doc]]:
    return [d["rules"] for d in by_kind(docs, kind)]


def test_chart_rbac_equals_k8s_rbac(helm_offline: Tool) -> None:
    chart = render(helm_offline)
    plain = [
        d
        for f in ("controller.yaml", "spark-driver.yaml")
        for d in yaml.safe_load_all((REPO / "k8s" / "rbac" / f).read_text())
        if d
    ]
    assert _rules(chart, "ClusterRole") == _rules(plain, "ClusterRole")
    assert sorted(map(json.dumps, _rules(chart, "Role"))) == sorted(
        map(json.dumps, _rules(plain, "Role"))
    )


def _rule_set(doc: Doc) -> dict[tuple[str, str], set[str]]:
    out: dict[tuple[str, str], set[str]] = {}
    for rule in doc["rules"]:
        for group in rule["apiGroups"]:
            for res in rule["resources"]:
                out.setdefault((group, res), set()).update(rule["verbs"])
    return out


@pytest.mark.parametrize("scope", ["cluster", "namespaced"])
def test_chart_rbac_is_exactly_the_declared_permissions(helm_offline: Tool, scope: str) -> None:
    """No missing, no extra verb: the chart's controller rules are REQUIRED_PERMISSIONS."""
    from controller.kube.api import required_rules

    docs = render(helm_offline, "--set", f"rbac.scope={scope}")
    controller = [d for d in docs if d["kind"] in ("ClusterRole", "Role")
                  and d["metadata"]["name"].endswith("-controller")]
    (role,) = controller
    assert role["kind"] == ("ClusterRole" if scope == "cluster" else "Role")
    assert _rule_set(role) == required_rules("jobs")
    (lease,) = [d for d in docs if d["metadata"]["name"].endswith("-leader-election")
                and d["kind"] == "Role"]
    assert lease["metadata"]["namespace"] == "sa-system"
    assert _rule_set(lease) == required_rules("lease")
    if scope == "namespaced":
        assert not by_kind(docs, "ClusterRole") and not by_kind(docs, "ClusterRoleBinding")
        assert role["metadata"]["namespace"] == "stream-jobs"
        (dep,) = by_kind(docs, "Deployment")
        assert "--namespace=stream-jobs" in dep["spec"]["template"]["spec"]["containers"][0][
            "args"]


def test_namespaced_mode_watches_one_namespace(helm_offline: Tool) -> None:
    docs = render(helm_offline, "--set", "rbac.scope=namespaced",
                  "--set", "jobNamespaces={jobs}")
    roles = {(d["kind"], d["metadata"]["name"]): d["metadata"]["namespace"]
             for d in docs if d["kind"] in ("Role", "RoleBinding")}
    assert roles[("Role", "stream-autoscaler-controller")] == "jobs"
    assert roles[("RoleBinding", "stream-autoscaler-controller")] == "jobs"
    assert roles[("Role", "stream-autoscaler-spark-driver")] == "jobs"
    default = render(helm_offline, "--set", "rbac.scope=namespaced")
    assert {d["metadata"]["namespace"] for d in default
            if d["kind"] in ("Role", "RoleBinding") and "-leader" not in d["metadata"]["name"]
            } == {"stream-jobs"}
    two = helm_offline("template", "x", str(CHART), "--set", "rbac.scope=namespaced",
                       "--set", "jobNamespaces={a,b}", check=False)
    assert two.returncode != 0 and "one release per namespace" in two.stderr
    cluster = helm_offline("template", "x", str(CHART), "--set", "controller.watchNamespace=a",
                           check=False)
    assert cluster.returncode != 0 and "needs rbac.scope=namespaced" in cluster.stderr
    no_lease = render(helm_offline, "--set", "controller.leaderElect=false")
    assert not [d for d in no_lease if d["metadata"]["name"].endswith("-leader-election")]


@pytest.mark.parametrize("values", [
    ["--set", "jobNamespaces={jobs,sa-system}"],
    ["--set", "rbac.scope=namespaced", "--set", "controller.watchNamespace=sa-system"],
    ["--set", "defaultJobNamespace=sa-system"],
], ids=["listed", "watched", "default"])
def test_jobs_never_run_in_the_release_namespace(helm_offline: Tool, values: list[str]) -> None:
    """A driver runs its job author's code; in the release namespace a pod it starts could
    name the controller's ServiceAccount. The chart refuses such values, naming the fix."""
    out = helm_offline("template", "x", str(CHART), "--namespace", "sa-system", *values,
                       check=False)
    assert out.returncode != 0, out.stdout[:500]
    assert "StreamJobs never run in the release namespace sa-system" in out.stderr
    assert "set jobNamespaces" in out.stderr


def test_job_namespaces_are_made_restricted_and_kept(helm_offline: Tool) -> None:
    """By default jobs run in ``stream-jobs``, which the chart creates (where it does not exist
    yet) labelled for the restricted Pod Security Standard and keeps on uninstall; the drivers'
    admission policy is bound to exactly the job namespaces."""
    docs = render(helm_offline, "--set", "jobNamespaces={jobs-a,jobs-b}")
    made = {d["metadata"]["name"]: d for d in by_kind(docs, "Namespace")}
    assert set(made) == {"jobs-a", "jobs-b"}
    for ns in made.values():
        assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
        assert ns["metadata"]["annotations"] == {"helm.sh/resource-policy": "keep"}
    (binding,) = by_kind(docs, "ValidatingAdmissionPolicyBinding")
    (sel,) = binding["spec"]["matchResources"]["namespaceSelector"]["matchExpressions"]
    assert (sel["key"], sel["operator"], sel["values"]) == (
        "kubernetes.io/metadata.name", "In", ["jobs-a", "jobs-b"])
    (policy,) = by_kind(docs, "ValidatingAdmissionPolicy")
    assert binding["spec"]["policyName"] == policy["metadata"]["name"]
    assert not by_kind(render(helm_offline, "--set", "createJobNamespaces=false"), "Namespace")
    assert not by_kind(render(helm_offline, "--set", "sparkDriver.admissionPolicy=false"),
                       "ValidatingAdmissionPolicy")


def test_drivers_network_policy_peers_reach_the_controller(helm_offline: Tool) -> None:
    (dep,) = by_kind(render(helm_offline), "Deployment")
    env = {e["name"]: e.get("value") for e in
           dep["spec"]["template"]["spec"]["containers"][0]["env"]}
    from controller.kube.network_policy import DriverIngress

    peers = DriverIngress.from_environment(env)
    (ctl,) = peers.control_from
    assert ctl["namespaceSelector"]["matchLabels"] == {"kubernetes.io/metadata.name": "sa-system"}
    labels = dep["spec"]["template"]["metadata"]["labels"]
    assert ctl["podSelector"]["matchLabels"].items() <= labels.items()
    assert peers.metrics_from[0]["podSelector"]["matchLabels"] == {
        "app.kubernetes.io/name": "prometheus"}
    none = render(helm_offline, "--set-json", "networkPolicy.driverControlFrom=[]")
    (dep,) = by_kind(none, "Deployment")
    env = {e["name"]: e.get("value") for e in
           dep["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert DriverIngress.from_environment(env).control_from == ()


def test_deployment_is_hardened(helm_offline: Tool) -> None:
    docs = render(helm_offline)
    (dep,) = by_kind(docs, "Deployment")
    pod = dep["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    assert c["args"][:2] == ["controller", "--leader-elect"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    assert c["securityContext"]["allowPrivilegeEscalation"] is False
    assert c["securityContext"]["capabilities"]["drop"] == ["ALL"]
    assert c["resources"]["requests"] and c["resources"]["limits"]
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert ports == {"health": 8080, "metrics": 9090}
    for probe in ("livenessProbe", "readinessProbe"):
        assert c[probe]["httpGet"] == {"path": "/healthz", "port": "health"}
    (svc,) = by_kind(docs, "Service")
    assert svc["spec"]["ports"][0]["port"] == 9090
    assert by_kind(docs, "NetworkPolicy")
    assert not by_kind(docs, "ServiceMonitor")
    monitored = render(helm_offline, "--set", "serviceMonitor.enabled=true")
    assert by_kind(monitored, "ServiceMonitor")


def test_grafana_dashboard_configmap_carries_the_dashboard(helm_offline: Tool) -> None:
    """On by default, labelled for Grafana's sidecar, the JSON equal to dashboards/ (the one
    copy); the label, namespace and annotations configurable; off renders nothing."""
    (cm,) = [d for d in by_kind(render(helm_offline), "ConfigMap")
             if d["metadata"]["name"] == "stream-autoscaler-dashboard"]
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert cm["metadata"]["namespace"] == "sa-system"
    (key,) = cm["data"]
    shipped = (CHART / "dashboards" / "stream-autoscaler.json").read_text()
    assert json.loads(cm["data"][key]) == json.loads(shipped)
    moved = render(helm_offline, "--set-json", 'grafanaDashboard.labels={"dash":"yes"}',
                   "--set", "grafanaDashboard.namespace=monitoring",
                   "--set", "grafanaDashboard.annotations.grafana_folder=Streaming")
    (cm,) = [d for d in by_kind(moved, "ConfigMap") if d["metadata"]["name"].endswith("-dashboard")]
    assert cm["metadata"]["labels"]["dash"] == "yes"
    assert cm["metadata"]["namespace"] == "monitoring"
    assert cm["metadata"]["annotations"] == {"grafana_folder": "Streaming"}
    off = render(helm_offline, "--set", "grafanaDashboard.enabled=false")
    assert not [d for d in by_kind(off, "ConfigMap") if d["metadata"]["name"].endswith(
        "-dashboard")]


def _wait_pods_running(kubectl: Tool, ns: str) -> list[Doc]:
    kubectl(
        "wait", "--for=jsonpath={.status.phase}=Running", "pod", "--all", "-n", ns, "--timeout=60s"
    )
    pods: list[Doc] = kubectl.json("get", "pods", "-n", ns)["items"]
    return pods


def test_install_upgrade_uninstall(helm: Tool, kubectl: Tool, crds: list[str]) -> None:
    ns, jobs, release = "sa-helm", "sa-helm-jobs", "stream-autoscaler"
    helm("uninstall", release, "-n", ns, "--wait", check=False)  # a previous failed run
    try:
        helm(
            "install", release, str(CHART), "-n", ns, "--create-namespace", "--wait",
            "--timeout=3m", "--set", f"jobNamespaces={{{jobs}}}",
        )
        dep = kubectl.json("get", "deployment", release, "-n", ns)
        assert dep["status"]["readyReplicas"] == 1
        pods = _wait_pods_running(kubectl, ns)
        assert all(p["spec"]["nodeName"].startswith("kwok-node-") for p in pods)
        names = {
            p["metadata"]["name"] for p in kubectl.json("get", "scalingpolicies", "-n", jobs)[
                "items"]
        }
        made = kubectl.json("get", "namespace", jobs)["metadata"]
        assert made["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
        assert names == {"default", "latency-first", "cost-saver", "half-core-executors"}
        assert (
            kubectl(
                "auth",
                "can-i",
                "update",
                "streamjobs.stream-autoscaler.io",
                "--subresource=status",
                "-n",
                "anywhere",
                f"--as=system:serviceaccount:{ns}:{release}",
                check=False,
            ).stdout.strip()
            == "yes"
        )

        helm(
            "upgrade",
            release,
            str(CHART),
            "-n",
            ns,
            "--wait",
            "--timeout=3m",
            "--set",
            "replicaCount=2",
            "--set",
            "policies.default.executors.max=12",
            "--set", f"jobNamespaces={{{jobs}}}",
        )
        dep = kubectl.json("get", "deployment", release, "-n", ns)
        assert dep["status"]["readyReplicas"] == 2
        default = kubectl.json("get", "scalingpolicy", "default", "-n", jobs)
        assert default["spec"]["executors"]["max"] == 12
        history = json.loads(helm("history", release, "-n", ns, "-o", "json").stdout)
        assert [h["revision"] for h in history] == [1, 2]
        assert history[-1]["status"] == "deployed"
    finally:
        helm("uninstall", release, "-n", ns, "--wait", "--timeout=2m", check=False)
    assert "not found" in helm("status", release, "-n", ns, check=False).stderr
    for where in (ns, jobs):
        gone = kubectl(
            "get",
            "deployments,scalingpolicies,serviceaccounts,roles",
            "-n",
            where,
            "-l",
            f"app.kubernetes.io/instance={release}",
            "-o",
            "name",
        ).stdout
        assert gone.strip() == ""
    # the job namespace stays (it holds the jobs); an upgrade kept it as the chart's too
    assert kubectl("get", "namespace", jobs, check=False).returncode == 0
    kubectl("delete", "namespace", jobs, "--wait=false")
    # CRDs stay (Helm never deletes crds/), so StreamJobs survive an uninstall.
    assert kubectl("get", "crd", "streamjobs.stream-autoscaler.io", check=False).returncode == 0
    kubectl("delete", "namespace", ns, "--wait=false")


def test_chart_crds_are_the_generated_ones() -> None:
    """Helm installs crds/ verbatim; they must be the same files as k8s/crds/."""
    chart = {f.name: f.read_text() for f in (CHART / "crds").glob("*.yaml")}
    plain = {f.name: f.read_text() for f in (REPO / "k8s" / "crds").glob("*.yaml")}
    assert chart and chart == plain, "regenerate with: .venv/bin/python -m contracts.crds"
