"""The generated CRDs against a real API server: what they accept, what they reject and how
the rejection names the field, and the printer columns of `kubectl get streamjobs`."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from contracts.manifests import ManifestError, load_manifest
from tests.integration.k8s.k8s_tier import REPO, Tool

pytestmark = pytest.mark.k8s

SAMPLES = REPO / "k8s" / "samples"
Doc = dict[str, Any]


def streamjob(name: str = "sj-test") -> Doc:
    doc: Doc = yaml.safe_load((SAMPLES / "streamjob-burst.yaml").read_text())
    doc["metadata"] = {"name": name}
    return doc


def policy(name: str = "policy-test") -> Doc:
    doc: Doc = yaml.safe_load((SAMPLES / "scalingpolicy-custom.yaml").read_text())
    doc["metadata"] = {"name": name}
    return doc


def apply(kubectl: Tool, ns: str, doc: Doc, *extra: str, check: bool = True) -> Any:
    return kubectl(
        "apply",
        "--validate=strict",
        "-n",
        ns,
        "-f",
        "-",
        *extra,
        input=json.dumps(doc),
        check=check,
    )


def test_crds_are_served_with_the_short_name(kubectl: Tool, crds: list[str]) -> None:
    assert set(crds) >= {"streamjobs.stream-autoscaler.io", "scalingpolicies.stream-autoscaler.io"}
    resources = kubectl("api-resources", "--api-group=stream-autoscaler.io", "-o", "wide").stdout
    assert "streamjobs" in resources and " sj " in f" {resources.replace(chr(9), ' ')} "
    assert "scalingpolicies" in resources
    sj = kubectl.json("get", "crd", "streamjobs.stream-autoscaler.io")
    version = sj["spec"]["versions"][0]
    assert version["name"] == "v1alpha1"
    assert "status" in version["subresources"]


def test_the_spark_settings_a_job_needs_are_accepted(
    kubectl: Tool, crds: list[str], namespace: str
) -> None:
    doc = streamjob()
    doc["spec"]["spark"] = {"conf": {
        "spark.sql.shuffle.partitions": "8", "spark.hadoop.fs.s3a.path.style.access": "true",
        "spark.executor.extraJavaOptions": "-XX:+UseG1GC -XX:MaxGCPauseMillis=200 -Xss4m"}}
    result = apply(kubectl, namespace, doc, check=False)
    assert result.returncode == 0, result.stderr


def test_valid_samples_are_accepted(kubectl: Tool, crds: list[str], namespace: str) -> None:
    apply(kubectl, namespace, policy("tight-slo"))
    apply(kubectl, namespace, streamjob("burst-count"))
    got = kubectl.json("get", "sj", "burst-count", "-n", namespace)
    assert got["spec"]["source"]["type"] == "burst"
    assert got["metadata"]["generation"] == 1


def test_a_checkpoint_at_the_mount_itself_is_accepted(
    kubectl: Tool, crds: list[str], namespace: str
) -> None:
    """The model and the CEL rule agree on the edge: location == mountPath (with or without a
    trailing slash) lies under it."""
    ckpt = {"location": "/checkpoints", "volume": {"claimName": "ck", "mountPath": "/checkpoints/"}}
    apply(kubectl, namespace, _set("spec.checkpoint", ckpt)(streamjob("at-the-mount")))


def test_a_managed_checkpoint_on_an_object_store_is_accepted(
    kubectl: Tool, crds: list[str], namespace: str
) -> None:
    """s3a:// is shared by every pod and outlives them: no claim needed, keys from a Secret."""
    ckpt = {"location": "s3a://checkpoints/jobs/j", "credentials": {"secretName": "s3-keys"}}
    apply(kubectl, namespace, _set("spec.checkpoint", ckpt)(streamjob("on-s3")))
    got = kubectl.json("get", "sj", "on-s3", "-n", namespace)
    assert got["spec"]["checkpoint"]["credentials"] == {"secretName": "s3-keys"}


def test_an_attached_job_keeps_a_bare_checkpoint_path(
    kubectl: Tool, crds: list[str], namespace: str
) -> None:
    """Attached: the runner runs elsewhere (a VM, a laptop) and its checkpoint is its own."""
    doc = _set("spec.checkpoint", {"location": "/data/checkpoints/attached"})(
        streamjob("attached-bare"))
    doc["spec"]["attach"] = {"controlUrl": "http://runner:8081", "metricsUrl":
                             "http://runner:9108/metrics"}
    apply(kubectl, namespace, doc)


def _set(path: str, value: Any) -> Callable[[Doc], Doc]:
    def mutate(doc: Doc) -> Doc:
        doc = copy.deepcopy(doc)
        *parents, leaf = path.split(".")
        node = doc
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = value
        return doc

    return mutate


# (base manifest, mutation, words the API server's answer must contain: the field and the why)
INVALID = [
    pytest.param(
        policy,
        _set("spec.executors", {"min": 9, "max": 2}),
        ["spec.executors", "min"],
        id="policy-executors-min-gt-max-cel",
    ),
    pytest.param(
        policy,
        _set("spec.partitions", {"min": 32, "max": 4}),
        ["spec.partitions", "min"],
        id="policy-partitions-min-gt-max-cel",
    ),
    pytest.param(
        policy,
        _set("spec.mode", "yolo"),
        ["spec.mode", "Unsupported value", "yolo"],
        id="policy-bad-enum",
    ),
    pytest.param(
        policy,
        _set("spec.executors.max", 100000),
        ["spec.executors.max"],
        id="policy-above-maximum",
    ),
    pytest.param(
        streamjob,
        _set("spec.sink.format", "avro"),
        ["spec.sink.format", "Unsupported value", "avro"],
        id="job-bad-enum",
    ),
    pytest.param(
        streamjob,
        _set("spec.replicas", 3),
        ["unknown field", "spec.replicas"],
        id="job-unknown-field",
    ),
    pytest.param(
        streamjob,
        _set("spec.executors.tuning", "fast"),
        ["unknown field", "spec.executors.tuning"],
        id="job-unknown-nested-field",
    ),
    pytest.param(
        streamjob,
        _set("spec.statePartitions", 0),
        ["spec.statePartitions", "greater than or equal to 1"],
        id="job-below-minimum",
    ),
    pytest.param(
        streamjob,
        _set("spec.application", {"script": "/app/job.py"}),
        ["spec", "set either application or source, pipeline and sink"],
        id="job-application-and-pipeline-cel",
    ),
    pytest.param(
        streamjob,
        lambda doc: _set("spec.application", {"script": "/app/job.py", "module": "a:f"})(
            {**doc, "spec": {k: v for k, v in doc["spec"].items()
                             if k not in ("source", "pipeline", "sink")}}),
        ["spec.application", "set exactly one of script or module"],
        id="job-application-script-and-module-cel",
    ),
    pytest.param(
        streamjob,
        lambda doc: _set("spec.application", {"script": "/app/job.py", "configMap": "jobs"})(
            {**doc, "spec": {k: v for k, v in doc["spec"].items()
                             if k not in ("source", "pipeline", "sink")}}),
        ["spec.application", "with configMap, script is the key of the ConfigMap"],
        id="job-application-configmap-key-cel",
    ),
    pytest.param(
        streamjob,
        _set("spec.checkpoint", {"location": "/var/lib/stream-autoscaler/checkpoints/j"}),
        ["spec", "checkpoint must be shared by the driver and every executor pod"],
        id="job-managed-checkpoint-not-shared-cel",
    ),
    pytest.param(
        streamjob,
        _set("spec.checkpoint", {"location": "file:///checkpoints/j"}),
        ["spec", "checkpoint must be shared by the driver and every executor pod"],
        id="job-managed-checkpoint-file-uri-cel",
    ),
    pytest.param(
        streamjob,
        _set("spec.checkpoint", {"location": "hdfs://namenode/checkpoints/j"}),
        ["spec", "checkpoint must be shared by the driver and every executor pod"],
        id="job-managed-checkpoint-hdfs-cel",
    ),
    pytest.param(
        streamjob,
        _set("spec.checkpoint", {"location": "/data/j", "credentials": {"secretName": "s3"}}),
        ["spec.checkpoint", "credentials are for a checkpoint on an object store"],
        id="job-checkpoint-keys-for-a-path-cel",
    ),
    pytest.param(
        streamjob,
        _set("spec.checkpoint", {"location": "/elsewhere/j", "volume": {
            "claimName": "checkpoints", "mountPath": "/checkpoints"}}),
        ["spec.checkpoint", "location must lie under volume.mountPath"],
        id="job-checkpoint-outside-its-volume-cel",
    ),
    pytest.param(
        streamjob,
        _set("spec.executors.memory", "lots"),
        ["spec.executors.memory"],
        id="job-pattern",
    ),
    # the Spark settings' allowlist and the vetted JVM flags (docs/security.md), as CEL
    pytest.param(
        streamjob,
        _set("spec.spark", {"conf": {"spark.driver.extraJavaOptions":
                                     "-Dspark.kubernetes.executor.secrets.db=/mnt/x"}}),
        ["spec.spark", "may carry only vetted GC, stack and memory flags, never -D"],
        id="job-spark-jvm-system-property-cel",
    ),
    pytest.param(
        streamjob,
        _set("spec.spark", {"conf": {"spark.kubernetes.executor.pod.featureSteps": "x.Step"}}),
        ["spec.spark", "conf may set only the allowed Spark settings"],
        id="job-spark-feature-steps-cel",
    ),
    pytest.param(
        streamjob,
        _set("spec.spark", {"conf": {
            "spark.kubernetes.executor.label.app.kubernetes.io/name": "prometheus"}}),
        ["spec.spark", "conf may set only the allowed Spark settings"],
        id="job-spark-executor-label-cel",
    ),
    pytest.param(
        streamjob,
        _set("spec.checkpoint", {"location": "/var/run/secrets/j", "volume": {
            "claimName": "checkpoints", "mountPath": "/var/run/secrets"}}),
        ["spec.checkpoint.volume", "mountPath may not be a system directory"],
        id="job-checkpoint-mount-on-the-token-cel",
    ),
]


@pytest.mark.parametrize(("base", "mutate", "expected"), INVALID)
def test_invalid_objects_are_rejected_naming_the_field(
    kubectl: Tool,
    crds: list[str],
    namespace: str,
    base: Callable[[], Doc],
    mutate: Callable[[Doc], Doc],
    expected: list[str],
) -> None:
    result = apply(kubectl, namespace, mutate(base()), check=False)
    assert result.returncode != 0, f"accepted an invalid object:\n{result.stdout}"
    for word in expected:
        assert word in result.stderr, f"{word!r} not in the API server's answer:\n{result.stderr}"


def test_server_side_strict_field_validation(
    kubectl: Tool, crds: list[str], namespace: str
) -> None:
    """Strict field validation is the API server's own: a raw POST with fieldValidation=Strict
    (what any client may send), no kubectl schema in between."""
    doc = _set("spec.unknownKnob", True)(streamjob())
    doc["metadata"]["namespace"] = namespace
    path = f"/apis/stream-autoscaler.io/v1alpha1/namespaces/{namespace}/streamjobs"
    result = kubectl(
        "create",
        "--raw",
        f"{path}?fieldValidation=Strict",
        "-f",
        "-",
        input=json.dumps(doc),
        check=False,
    )
    assert result.returncode != 0
    assert 'unknown field "spec.unknownKnob"' in result.stderr


def test_checkpoint_location_is_immutable(kubectl: Tool, crds: list[str], namespace: str) -> None:
    apply(kubectl, namespace, streamjob("immutable"))
    moved = _set("spec.checkpoint.location", "/var/lib/stream-autoscaler/checkpoints/elsewhere")(
        streamjob("immutable"))
    result = apply(kubectl, namespace, moved, check=False)
    assert result.returncode != 0, "the checkpoint location changed on a live job"
    assert "spec.checkpoint" in result.stderr
    # Other fields still change.
    apply(kubectl, namespace, _set("spec.trigger.intervalSeconds", 5)(streamjob("immutable")))


COLUMNS = [
    "NAME",
    "PHASE",
    "EXECUTORS",
    "PARTITIONS",
    "INPUT/S",
    "PROCESSED/S",
    "LAG",
    "BOTTLENECK",
    "AGE",
]


def test_get_streamjobs_prints_status_columns(
    kubectl: Tool, crds: list[str], namespace: str
) -> None:
    apply(kubectl, namespace, streamjob("columns"))
    status = {
        "phase": "Scaling",
        "observedGeneration": 1,
        "executors": {"current": 2, "target": 4},
        "executorsDisplay": "2/4",
        "partitions": 8,
        "inputRate": 1500,
        "processedRate": 1250,
        "lagSeconds": 12,
        "bottleneck": "task-slots",
    }
    kubectl(
        "patch",
        "sj",
        "columns",
        "-n",
        namespace,
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps({"status": status}),
    )
    out = kubectl("get", "streamjobs", "-n", namespace).stdout.splitlines()
    header, row = out[0].split(), out[1].split()
    assert header == COLUMNS
    values = dict(zip(header, row, strict=True))
    assert values["NAME"] == "columns"
    assert values["PHASE"] == "Scaling"
    assert values["EXECUTORS"] == "2/4"
    assert values["PARTITIONS"] == "8"
    assert values["INPUT/S"] == "1500"
    assert values["PROCESSED/S"] == "1250"
    assert values["LAG"].startswith("12")
    assert values["BOTTLENECK"] == "task-slots"
    # The short name prints the same table.
    assert kubectl("get", "sj", "-n", namespace).stdout.splitlines()[0].split() == COLUMNS


def test_status_is_a_subresource(kubectl: Tool, crds: list[str], namespace: str) -> None:
    """Status written through the main resource is dropped; through /status it does not bump
    the generation (so observedGeneration compares against spec changes only)."""
    job = streamjob("subresource")
    job["status"] = {"phase": "Failed"}
    apply(kubectl, namespace, job)
    got = kubectl.json("get", "sj", "subresource", "-n", namespace)
    assert got.get("status", {}).get("phase") != "Failed"
    kubectl(
        "patch",
        "sj",
        "subresource",
        "-n",
        namespace,
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps({"status": {"phase": "Running", "observedGeneration": 1}}),
    )
    got = kubectl.json("get", "sj", "subresource", "-n", namespace)
    assert got["status"]["phase"] == "Running"
    assert got["metadata"]["generation"] == 1


SAMPLE_FILES = sorted(SAMPLES.glob("*.yaml"))


@pytest.mark.parametrize("sample", SAMPLE_FILES, ids=[f.name for f in SAMPLE_FILES])
def test_every_sample_gets_the_same_verdict_from_the_api_server_and_validate_cluster(
    kubectl: Tool, crds: list[str], sample: Path
) -> None:
    """One manifest, two places. The local samples (``runner --job``) checkpoint to a plain
    directory: the API server refuses them as managed jobs (their state would stay on the pods'
    own disks), and so does ``validate --cluster``; the cluster samples (``streamjob-*``) mount
    the shared claim and both accept them."""
    out = kubectl("apply", "--dry-run=server", "--validate=strict", "-f", str(sample),
                  check=False)
    try:
        load_manifest(sample, cluster=True)
        ours = None
    except ManifestError as e:
        ours = "\n".join(e.problems)
    if sample.name.startswith("streamjob-") or "kind: ScalingPolicy" in sample.read_text():
        assert ours is None, ours
    if ours is None:
        assert out.returncode == 0 and "(server dry run)" in out.stdout, out.stderr
    else:
        assert out.returncode != 0, f"the API server accepted what --cluster refuses: {ours}"
        assert "checkpoint must be shared by the driver and every executor pod" in out.stderr
        assert "checkpoint must be shared by the driver and every executor pod" in ours
