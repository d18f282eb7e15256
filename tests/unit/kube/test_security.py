"""Least privilege (docs/security.md): the controller's verbs declared once and equal to the
plain RBAC manifest, the settings a job may not override, pods that meet the ``restricted``
Pod Security Standard, Spark RPC authentication, and the drivers' NetworkPolicy."""

from __future__ import annotations

import ast
import inspect
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from contracts.manifests import load_job
from contracts.streamjob import (
    IN_CLUSTER_MASTER,
    PROTECTED_SPARK_CONF,
    SparkSpec,
    StreamJob,
    protected_spark_key,
)
from controller.kube import api as api_mod
from controller.kube import network_policy as netpol
from controller.kube import resources
from controller.kube.settings import ManagedSettings
from tests.realcomponents import REPO

SAMPLE = yaml.safe_load((REPO / "k8s" / "samples" / "streamjob-burst.yaml").read_text())
META = {"name": "wc", "namespace": "jobs", "uid": "1234-5678", "generation": 1}
OBJ: dict[str, Any] = {**SAMPLE, "metadata": META}


def model(conf: dict[str, str] | None = None, **spark: Any) -> StreamJob:
    doc = {**OBJ, "spec": {**OBJ["spec"], "spark": {**spark, "conf": conf or {}}}}
    return StreamJob.model_validate(doc)


# --- the controller's verbs ------------------------------------------------------------------


def rules_of(doc: dict[str, Any]) -> dict[tuple[str, str], set[str]]:
    out: dict[tuple[str, str], set[str]] = {}
    for rule in doc["rules"]:
        for group in rule["apiGroups"]:
            for res in rule["resources"]:
                out.setdefault((group, res), set()).update(rule["verbs"])
    return out


def test_every_api_method_declares_its_permissions() -> None:
    """A new KubeApi method that calls the API server must say what it needs."""
    methods = {
        name for name, fn in inspect.getmembers(api_mod.KubeApi, inspect.isfunction)
        if not name.startswith("_") and name not in ("from_environment", "lister")
    }
    assert methods <= set(api_mod.REQUIRED_PERMISSIONS), methods - set(
        api_mod.REQUIRED_PERMISSIONS)
    assert "leader_election" in api_mod.REQUIRED_PERMISSIONS


def test_ensure_declares_every_kind_it_creates() -> None:
    src = inspect.getsource(api_mod.KubeApi.ensure)
    table = next(n for n in ast.walk(ast.parse(src.strip().replace("\n    ", "\n")))
                 if isinstance(n, ast.Dict))
    kinds = {k.value for k in table.keys if isinstance(k, ast.Constant)}
    assert kinds == set(api_mod.OWNED_KINDS)


def test_plain_rbac_is_exactly_the_declared_permissions() -> None:
    docs = [d for d in yaml.safe_load_all((REPO / "k8s/rbac/controller.yaml").read_text()) if d]
    (cluster,) = [d for d in docs if d["kind"] == "ClusterRole"]
    (lease,) = [d for d in docs if d["kind"] == "Role"]
    assert rules_of(cluster) == api_mod.required_rules("jobs")
    assert rules_of(lease) == api_mod.required_rules("lease")


def test_the_controller_never_lists_secrets_or_touches_rbac() -> None:
    jobs = api_mod.required_rules("jobs")
    assert jobs[("", "secrets")] == {"get", "create"}
    assert not any(g == "rbac.authorization.k8s.io" for g, _ in jobs)
    assert all("*" not in verbs for verbs in jobs.values())


def test_spark_driver_role_is_executor_pods_only() -> None:
    docs = [d for d in yaml.safe_load_all((REPO / "k8s/rbac/spark-driver.yaml").read_text())
            if d]
    (role,) = [d for d in docs if d["kind"] == "Role"]
    assert rules_of(role) == {
        ("", "pods"): {"get", "list", "watch", "create", "delete", "deletecollection"}
    }


# --- settings a job may not override -------------------------------------------------------


@pytest.mark.parametrize(
    "key",
    [
        "spark.kubernetes.container.image",
        "spark.kubernetes.executor.container.image",
        "spark.kubernetes.authenticate.driver.serviceAccountName",
        "spark.kubernetes.namespace",
        "spark.kubernetes.driver.pod.name",
        "spark.kubernetes.executor.podTemplateFile",
        "spark.kubernetes.executor.volumes.hostPath.root.mount.path",
        "spark.kubernetes.driver.volumes.persistentVolumeClaim.x.options.claimName",
        "spark.kubernetes.executor.secrets.other-job-control-token",
        "spark.kubernetes.executor.label.stream-autoscaler.io/job",
        "spark.authenticate",
        "spark.authenticate.secret",
        "spark.ui.killEnabled",
        "spark.kubernetes.driver.master",
        "spark.master",
    ],
)
def test_protected_settings_are_refused_naming_the_key(key: str) -> None:
    with pytest.raises(ValidationError) as e:
        model({key: "x"})
    assert key in str(e.value) and "the controller owns" in str(e.value)


@pytest.mark.parametrize(
    "key",
    ["spark.sql.shuffle.partitions", "spark.executor.memoryOverhead",
     "spark.kubernetes.executor.label.team", "spark.kubernetes.executor.request.cores",
     "spark.ui.port", "spark.network.crypto.enabled", "spark.authenticat"],
)
def test_other_settings_are_kept(key: str) -> None:
    assert protected_spark_key(key) is None
    job = model({key: "1"})
    conf = _conf(job)
    assert conf[key] == "1"


def test_the_crd_has_one_rule_per_protected_entry() -> None:
    crd = yaml.safe_load((REPO / "k8s/crds/streamjobs.yaml").read_text())
    spark = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"][
        "properties"]["spark"]
    messages = [r["message"] for r in spark["x-kubernetes-validations"]]
    assert [m.split(" ")[4].rstrip(":") for m in messages] == list(PROTECTED_SPARK_CONF)
    assert spark["properties"]["conf"]["maxProperties"] > 0


def _conf(job: StreamJob) -> dict[str, str]:
    names = resources.Names.of(OBJ)
    text = resources.runner_manifest(job, names, ManagedSettings(image="img:1"), executors=2)
    return dict(yaml.safe_load(text)["spec"]["spark"]["conf"])


def test_the_controllers_manifest_carries_every_owned_setting_and_loads(tmp_path: Any) -> None:
    """The driver's manifest may hold protected keys (its master is the in-cluster one), and
    the runner's loader accepts it."""
    job = model({"spark.sql.shuffle.partitions": "8"})
    names = resources.Names.of(OBJ)
    text = resources.runner_manifest(job, names, ManagedSettings(image="img:1"), executors=2)
    path = tmp_path / "job.yaml"
    path.write_text(text)
    loaded = load_job(path)
    assert loaded.spec.spark.master == IN_CLUSTER_MASTER
    owned = resources.owned_spark_conf(job, names, ManagedSettings(image="img:1"))
    assert all(protected_spark_key(k) for k in owned), [
        k for k in owned if not protected_spark_key(k)]
    for k, v in owned.items():
        assert loaded.spec.spark.conf[k] == v
    assert loaded.spec.spark.conf["spark.sql.shuffle.partitions"] == "8"


def test_a_stored_protected_setting_never_reaches_the_driver() -> None:
    """An object stored before the rule (the model refuses it now) is built without it."""
    job = model()
    sneaky = job.spec.spark.model_copy(update={"conf": {
        "spark.kubernetes.container.image": "evil:1",
        "spark.kubernetes.executor.volumes.hostPath.h.mount.path": "/host",
        "spark.ui.killEnabled": "true",
    }})
    job = job.model_copy(update={"spec": job.spec.model_copy(update={"spark": sneaky})})
    conf = _conf(job)
    assert conf["spark.kubernetes.container.image"] == "img:1"
    assert conf["spark.ui.killEnabled"] == "false"
    assert not any("hostPath" in k for k in conf)


def test_the_in_cluster_master_is_the_only_exception() -> None:
    SparkSpec.model_validate({"master": IN_CLUSTER_MASTER, "conf": {"spark.authenticate": "x"}})
    with pytest.raises(ValidationError):
        SparkSpec.model_validate({"master": "k8s://https://elsewhere:6443",
                                  "conf": {"spark.authenticate": "false"}})


# --- RPC authentication, UI kill, what the drivers' Role is sized for ------------------------


def test_rpc_is_authenticated_and_the_ui_cannot_kill() -> None:
    conf = _conf(model())
    assert conf["spark.authenticate"] == "true"
    assert conf["spark.ui.killEnabled"] == "false"
    assert not any(k.startswith("spark.authenticate.secret") for k in conf), (
        "Spark generates the secret per application; it must not be in the ConfigMap")
    cm = resources.config_map(OBJ, resources.runner_manifest(
        model(), resources.Names.of(OBJ), ManagedSettings(), 1))
    assert "secret" not in "".join(cm["data"].values()).lower().replace(
        "secretkeyref", "")


def test_spark_needs_nothing_beyond_executor_pods() -> None:
    conf = _conf(model())
    assert conf["spark.kubernetes.executor.disableConfigMap"] == "true"
    assert conf["spark.kubernetes.driver.service.deleteOnTermination"] == "false"
    assert conf["spark.kubernetes.executor.deleteOnTermination"] == "true"
    assert conf[f"spark.kubernetes.executor.label.{resources.JOB_LABEL}"] == "wc"


# --- restricted pods -------------------------------------------------------------------------


def _restricted(pod_spec: dict[str, Any], containers: list[dict[str, Any]]) -> None:
    psc = pod_spec["securityContext"]
    assert psc["runAsNonRoot"] is True and psc["runAsUser"] == resources.RUN_AS != 0
    assert psc["seccompProfile"] == {"type": "RuntimeDefault"}
    for c in containers:
        sc = c["securityContext"]
        assert sc["allowPrivilegeEscalation"] is False
        assert sc["capabilities"] == {"drop": ["ALL"]}
    for v in pod_spec.get("volumes", []):
        assert set(v) - {"name"} <= {"configMap", "secret", "persistentVolumeClaim", "emptyDir",
                                     "projected", "downwardAPI"}, v


def test_driver_pod_is_restricted() -> None:
    job = model()
    pod = resources.driver_pod(OBJ, job, ManagedSettings(), executors=1, max_executors=2)
    _restricted(pod["spec"], pod["spec"]["containers"])


def test_executor_template_is_restricted_and_tokenless() -> None:
    tpl = resources.executor_pod_template()
    _restricted(tpl["spec"], tpl["spec"]["containers"])
    assert tpl["spec"]["automountServiceAccountToken"] is False
    assert tpl["spec"]["containers"][0]["name"] == resources.EXECUTOR_CONTAINER
    cm = resources.config_map(OBJ, "x")
    assert yaml.safe_load(cm["data"][resources.EXECUTOR_TEMPLATE_KEY]) == tpl
    conf = _conf(model())
    assert conf["spark.kubernetes.executor.podTemplateFile"] == (
        f"{resources.MANIFEST_DIR}/{resources.EXECUTOR_TEMPLATE_KEY}")
    assert conf["spark.kubernetes.executor.podTemplateContainerName"] == "executor"


# --- the drivers' NetworkPolicy ----------------------------------------------------------------

CONTROLLER = {"podSelector": {"matchLabels": {"app": "ctl"}}}
PROMETHEUS = {"podSelector": {"matchLabels": {"app": "prom"}}}


def test_network_policy_admits_controller_prometheus_and_own_executors_only() -> None:
    s = ManagedSettings()
    np = netpol.network_policy(
        OBJ, s, netpol.DriverIngress((CONTROLLER,), (PROMETHEUS,)))
    spec = np["spec"]
    assert np["metadata"]["ownerReferences"][0]["uid"] == "1234-5678"
    assert spec["podSelector"] == {"matchLabels": {resources.JOB_LABEL: "wc",
                                                   "spark-role": "driver"}}
    assert spec["policyTypes"] == ["Ingress"]

    def ports(rule: dict[str, Any]) -> set[int]:
        return {p["port"] for p in rule["ports"]}

    control, metrics, rpc = spec["ingress"]
    assert control["from"] == [CONTROLLER] and ports(control) == {s.control_port, s.metrics_port}
    assert metrics["from"] == [PROMETHEUS] and ports(metrics) == {s.metrics_port}
    assert rpc["from"] == [{"podSelector": {"matchLabels": {
        resources.JOB_LABEL: "wc", "spark-role": "executor"}}}]
    assert ports(rpc) == {s.driver_port, s.block_manager_port}
    everything = set().union(*(ports(r) for r in spec["ingress"]))
    assert s.ui_port not in everything


def test_an_empty_peer_list_admits_no_one_rather_than_everyone() -> None:
    np = netpol.network_policy(OBJ, ManagedSettings(), netpol.DriverIngress((), ()))
    assert all(rule.get("from") for rule in np["spec"]["ingress"])
    assert len(np["spec"]["ingress"]) == 1


def test_driver_ingress_from_the_environment() -> None:
    d = netpol.DriverIngress.from_environment({"POD_NAMESPACE": "ctl-ns"})
    assert d.control_from[0]["namespaceSelector"]["matchLabels"] == {
        "kubernetes.io/metadata.name": "ctl-ns"}
    got = netpol.DriverIngress.from_environment({
        netpol.CONTROL_FROM_ENV: '[{"podSelector": {}}]', netpol.METRICS_FROM_ENV: "[]"})
    assert got == netpol.DriverIngress(({"podSelector": {}},), ())
    for bad in ("{", '{"a": 1}', "[1]"):
        with pytest.raises(ValueError, match=netpol.CONTROL_FROM_ENV):
            netpol.DriverIngress.from_environment({netpol.CONTROL_FROM_ENV: bad})
