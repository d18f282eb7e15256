"""Least privilege (docs/security.md): the controller's verbs declared once and equal to the
plain RBAC manifest, the settings a job may not override, pods that meet the ``restricted``
Pod Security Standard, Spark RPC authentication, and the drivers' NetworkPolicy."""

from __future__ import annotations

import ast
import inspect
import json
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from contracts.manifests import load_job
from contracts.streamjob import (
    ALLOWED_SPARK_CONF,
    CLUSTER_CONTEXT,
    IN_CLUSTER_MASTER,
    PROTECTED_SPARK_CONF,
    SparkSpec,
    StreamJob,
    protected_spark_key,
    spark_conf_problem,
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
    """The sample with this ``spark``, validated as the controller and the API server do."""
    doc = {**OBJ, "spec": {**OBJ["spec"], "spark": {**spark, "conf": conf or {}}}}
    return StreamJob.model_validate(doc, context={CLUSTER_CONTEXT: True})


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


BYPASSES: list[tuple[str, str, str]] = [
    # (key, value, what the refusal names): every way a job author reached a protected setting
    # or shaped the executor pods while the settings were a denylist
    ("spark.driver.extraJavaOptions", "-Dspark.kubernetes.executor.secrets.db-creds=/mnt/x",
     "-Dspark.kubernetes.executor.secrets"),
    ("spark.executor.extraJavaOptions",
     "-XX:+UseG1GC -Dspark.kubernetes.executor.volumes.hostPath.h.mount.path=/host",
     "-Dspark.kubernetes.executor.volumes"),
    ("spark.driver.extraJavaOptions", "-XX:+UseG1GC\n-Dspark.authenticate=false",
     "-Dspark.authenticate"),
    ("spark.driver.extraJavaOptions", "-javaagent:/tmp/a.jar", "-javaagent"),
    ("spark.driver.extraJavaOptions", "-agentlib:jdwp=transport=dt_socket", "-agentlib"),
    ("spark.driver.extraJavaOptions", "-Xbootclasspath/a:/tmp", "-Xbootclasspath"),
    ("spark.driver.extraJavaOptions", "-XX:+UnlockDiagnosticVMOptions", "Unlock"),
    ("spark.driver.extraJavaOptions", "-XX:HeapDumpPath=/etc/passwd", "HeapDumpPath"),
    ("spark.driver.extraJavaOptions", "-Xlog:gc:file=/etc/x", "-Xlog:gc:file"),
    ("spark.driver.defaultJavaOptions", "-Dspark.kubernetes.executor.secrets.s=/m",
     "spark.driver.defaultJavaOptions"),
    ("spark.executor.defaultJavaOptions", "-XX:+UseG1GC", "spark.executor.defaultJavaOptions"),
    ("spark.kubernetes.executor.pod.featureSteps", "org.evil.Step",
     "spark.kubernetes.executor.pod.featureSteps"),
    ("spark.jars", "http://evil.example/step.jar", "spark.jars"),
    ("spark.jars.packages", "org.evil:step:1", "spark.jars.packages"),
    ("spark.kubernetes.hadoop.configMapName", "other", "spark.kubernetes.hadoop.configMapName"),
    ("spark.kubernetes.executor.hadoopConfigMapName", "other",
     "spark.kubernetes.executor.hadoopConfigMapName"),
    ("spark.kubernetes.executor.annotation.sidecar.istio.io/inject", "true",
     "spark.kubernetes.executor.annotation"),
    ("spark.kubernetes.node.selector.kubernetes.io/hostname", "n1",
     "spark.kubernetes.node.selector"),
    ("spark.kubernetes.executor.node.selector.zone", "a", "spark.kubernetes.executor.node"),
    ("spark.kubernetes.scheduler.name", "evil", "spark.kubernetes.scheduler.name"),
    ("spark.kubernetes.executor.scheduler.name", "evil",
     "spark.kubernetes.executor.scheduler.name"),
    ("spark.kubernetes.executor.label.app.kubernetes.io/name", "prometheus",
     "spark.kubernetes.executor.label"),
    ("spark.kubernetes.executor.label.team", "a", "spark.kubernetes.executor.label.team"),
    ("spark.master=k8s://https://evil:6443", "x", "spark.master="),
    ("spark.sql.shuffle.partitions=8 --conf spark.authenticate", "false",
     "not a Spark setting's name"),
    ("spark.executorEnv.AWS_SECRET_ACCESS_KEY", "x", "spark.executorEnv"),
    ("spark.executor.extraClassPath", "/tmp", "spark.executor.extraClassPath"),
    ("spark.executor.instances", "50", "the controller sets the executor count"),
    ("spark.dynamicAllocation.enabled", "true", "dynamic allocation"),
    ("spark.executor.memoryOverhead", "4g", "spark.executor.memoryOverhead"),
    ("spark.kubernetes.executor.request.cores", "4", "spec.executors.cpu"),
    ("spark.ui.port", "80", "spark.ui.port"),
    ("spark.authenticat", "x", "spark.authenticat"),
]


@pytest.mark.parametrize(("key", "value", "named"), BYPASSES)
def test_every_bypass_is_refused_naming_the_key(key: str, value: str, named: str) -> None:
    """By the model (and so by ``validate --cluster`` and the controller), with what it names;
    the CRD's CEL rule is built from the same allowlist (test_crds.py loads it into a real API
    server and refuses the same keys there)."""
    with pytest.raises(ValidationError) as e:
        model({key: value})
    assert named in str(e.value), str(e.value)
    assert spark_conf_problem(key, value) is not None


def test_a_refused_setting_never_reaches_the_driver_even_when_stored() -> None:
    """An object stored before the allowlist (the model refuses it now) is built without it."""
    job = model()
    sneaky = job.spec.spark.model_copy(update={"conf": dict(
        (k, v) for k, v, _ in BYPASSES if protected_spark_key(k) is None)})
    job = job.model_copy(update={"spec": job.spec.model_copy(update={"spark": sneaky})})
    conf = _conf(job)
    for key, value, _ in BYPASSES:
        assert conf.get(key) != value or key in resources.owned_spark_conf(
            job, resources.Names.of(OBJ), ManagedSettings(image="img:1")), key


@pytest.mark.parametrize(
    ("key", "value"),
    [("spark.sql.shuffle.partitions", "8"), ("spark.network.crypto.enabled", "true"),
     ("spark.hadoop.fs.s3a.endpoint", "http://minio.storage.svc:9000"),
     ("spark.serializer", "org.apache.spark.serializer.KryoSerializer"),
     ("spark.memory.fraction", "0.5"), ("spark.kafka.consumer.cache.capacity", "128"),
     ("spark.driver.extraJavaOptions", "-XX:+UseG1GC -XX:MaxGCPauseMillis=200 -Xss4m"),
     ("spark.executor.extraJavaOptions", " -XX:+ExitOnOutOfMemoryError  -Xlog:gc*:stdout "),
     ("spark.executor.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"),
     ("spark.executor.extraJavaOptions", "")],
)
def test_the_settings_a_job_needs_are_kept(key: str, value: str) -> None:
    assert spark_conf_problem(key, value) is None
    assert _conf(model({key: value}))[key] == value


def test_every_allowed_entry_stays_clear_of_what_the_controller_owns() -> None:
    for a in ALLOWED_SPARK_CONF:
        assert protected_spark_key(a.rstrip("*")) is None, a
        assert a.endswith(("*", "JavaOptions")) or "." in a, a
    for p in PROTECTED_SPARK_CONF:
        assert spark_conf_problem(p.rstrip("*") + ("x" if p.endswith("*") else ""), "v"), p


def test_the_crd_rules_are_built_from_the_allowlist() -> None:
    crd = yaml.safe_load((REPO / "k8s/crds/streamjobs.yaml").read_text())
    spark = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"][
        "properties"]["spark"]
    rules = [r["rule"] for r in spark["x-kubernetes-validations"]]
    for a in ALLOWED_SPARK_CONF:
        assert (f'k.startsWith("{a[:-1]}")' if a.endswith("*") else f'k == "{a}"') in rules[0]
    assert sum(".matches(" in r for r in rules) == 2
    assert spark["properties"]["conf"]["maxProperties"] > 0
    assert spark["properties"]["conf"]["additionalProperties"]["maxLength"] > 0


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


def test_the_in_cluster_master_is_the_only_exception() -> None:
    """The runner reads the controller's own manifest; validated as the API server does (the
    controller, ``validate --cluster``), the same master gets no exception."""
    SparkSpec.model_validate({"master": IN_CLUSTER_MASTER, "conf": {"spark.authenticate": "x"}})
    with pytest.raises(ValidationError):
        SparkSpec.model_validate({"master": "k8s://https://elsewhere:6443",
                                  "conf": {"spark.authenticate": "false"}})
    with pytest.raises(ValidationError):
        SparkSpec.model_validate({"master": IN_CLUSTER_MASTER,
                                  "conf": {"spark.authenticate": "false"}},
                                 context={CLUSTER_CONTEXT: True})


# --- RPC authentication, UI kill, what the drivers' Role is sized for ------------------------


def test_rpc_is_authenticated_and_the_ui_cannot_kill() -> None:
    conf = _conf(model())
    assert conf["spark.authenticate"] == "true"
    assert conf["spark.ui.killEnabled"] == "false"
    assert [k for k in conf if k.startswith("spark.authenticate.secret")] == [
        "spark.authenticate.secret.file"], "the secret's value never reaches the ConfigMap"


def test_the_rpc_secret_is_a_file_never_a_pod_env() -> None:
    """Spark 4.3's BasicExecutorFeatureStep puts the RPC secret in an executor's environment
    (``_SPARK_AUTH_SECRET``) unless ``spark.authenticate.secret.executor.file`` (which falls
    back to ``spark.authenticate.secret.file``) is set: then every executor reads the file from
    the job's own Secret, mounted by the template, as the driver does. Whoever may list the
    namespace's pods sees the Secret's name, never its value."""
    names = resources.Names.of(OBJ)
    path = _conf(model())["spark.authenticate.secret.file"]
    secret = resources.spark_auth_secret(OBJ)
    assert secret["metadata"]["name"] == names.spark_auth == "wc-spark-auth"
    assert secret["metadata"]["ownerReferences"][0]["uid"] == OBJ["metadata"]["uid"]
    assert len(secret["stringData"][resources.SPARK_AUTH_KEY]) == 64
    assert resources.spark_auth_secret(OBJ)["stringData"] != secret["stringData"]
    tpl = resources.executor_pod_template(names)
    driver = resources.driver_pod(OBJ, model(), ManagedSettings(), executors=1, max_executors=2)
    for spec in (tpl["spec"], driver["spec"]):
        (vol,) = [v for v in spec["volumes"] if v["name"] == resources.SPARK_AUTH_VOLUME]
        assert vol["secret"]["secretName"] == names.spark_auth
        (mount,) = [m for m in spec["containers"][0]["volumeMounts"]
                    if m["name"] == resources.SPARK_AUTH_VOLUME]
        assert f"{mount['mountPath']}/{vol['secret']['items'][0]['path']}" == path
        assert mount["readOnly"] is True
    cm = resources.config_map(OBJ, resources.runner_manifest(
        model(), names, ManagedSettings(), 1))
    assert secret["stringData"][resources.SPARK_AUTH_KEY] not in json.dumps(cm)
    assert not [e for e in driver["spec"]["containers"][0]["env"] if "value" in e
                and "AUTH" in e["name"]]


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
    tpl = resources.executor_pod_template(resources.Names.of(OBJ))
    _restricted(tpl["spec"], tpl["spec"]["containers"])
    assert tpl["spec"]["automountServiceAccountToken"] is False
    assert tpl["spec"]["containers"][0]["name"] == resources.EXECUTOR_CONTAINER
    cm = resources.config_map(OBJ, "x")
    assert yaml.safe_load(cm["data"][resources.EXECUTOR_TEMPLATE_KEY]) == tpl
    conf = _conf(model())
    # Spark 4.3 (ExecutorKubernetesCredentialsFeatureStep) gives executors the driver's
    # ServiceAccount unless told: the admission policy admits executors as `default` only
    assert conf["spark.kubernetes.authenticate.executor.serviceAccountName"] == "default"
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


def test_a_local_job_may_hand_its_executors_keys_but_never_the_controllers_settings() -> None:
    """On one's own machine (runner --job) the executors are one's own processes: the
    allowlist is the cluster's rule; what the controller owns is refused everywhere."""
    keys = {"spark.executorEnv.AWS_ACCESS_KEY_ID": "k",
            "spark.executorEnv.AWS_SECRET_ACCESS_KEY": "s"}
    doc = {**OBJ, "spec": {**OBJ["spec"], "spark": {"conf": keys}}}
    assert StreamJob.model_validate(doc).spec.spark.conf == keys
    with pytest.raises(ValidationError, match=r"spark\.executorEnv\.AWS_ACCESS_KEY_ID is not a"):
        StreamJob.model_validate(doc, context={CLUSTER_CONTEXT: True})
    owned = {**OBJ, "spec": {**OBJ["spec"], "spark": {"conf": {
        "spark.kubernetes.container.image": "evil:1"}}}}
    with pytest.raises(ValidationError, match="the controller owns it"):
        StreamJob.model_validate(owned)
