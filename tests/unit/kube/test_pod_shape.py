"""What a managed job's pods look like: executor CPU and memory, the shared checkpoint claim."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from contracts.manifests import error_lines
from contracts.streamjob import CLUSTER_CONTEXT, NOT_SHARED, StreamJob
from controller.kube import resources
from controller.kube.settings import ManagedSettings
from tests.realcomponents import REPO

SAMPLE = yaml.safe_load((REPO / "k8s" / "samples" / "streamjob-burst.yaml").read_text())
META = {"name": "wc", "namespace": "jobs", "uid": "1234-5678", "generation": 1}
PVC = "spark.kubernetes.executor.volumes.persistentVolumeClaim.checkpoint"


def job(executors: dict[str, Any] | None = None,
        checkpoint: dict[str, Any] | None = None) -> tuple[dict[str, Any], StreamJob]:
    doc = {**SAMPLE, "metadata": META}
    spec = dict(doc["spec"])
    if executors is not None:
        spec["executors"] = {**spec["executors"], **executors}
    if checkpoint is not None:
        spec["checkpoint"] = checkpoint
    doc["spec"] = spec
    return doc, StreamJob.model_validate(doc)


def conf_of(model: StreamJob, obj: dict[str, Any]) -> dict[str, str]:
    names = resources.Names.of(obj)
    manifest = resources.runner_manifest(model, names, ManagedSettings(), executors=2)
    return dict(yaml.safe_load(manifest)["spec"]["spark"]["conf"])


@pytest.mark.parametrize(
    ("executors", "expected"),
    [
        ({}, {}),
        ({"cpu": "500m"}, {"spark.kubernetes.executor.request.cores": "500m",
                           "spark.kubernetes.executor.limit.cores": "500m"}),
        ({"cpu": "250m", "cpuLimit": "1"}, {"spark.kubernetes.executor.request.cores": "250m",
                                            "spark.kubernetes.executor.limit.cores": "1"}),
        ({"memoryOverhead": "384m"}, {"spark.executor.memoryOverhead": "384m"}),
    ],
    ids=["spark-defaults", "request-is-the-limit", "own-limit", "memory-overhead"],
)
def test_executor_pod_resources(executors: dict[str, Any], expected: dict[str, str]) -> None:
    obj, model = job(executors=executors)
    conf = conf_of(model, obj)
    keys = ("spark.kubernetes.executor.request", "spark.kubernetes.executor.limit",
            "spark.executor.memoryOverhead")
    shape = {k: v for k, v in conf.items() if k.startswith(keys)}
    assert shape == expected


def test_the_checkpoint_claim_is_mounted_at_one_path_in_driver_and_executors() -> None:
    ckpt = {"location": "/checkpoints/wc",
            "volume": {"claimName": "stream-checkpoints", "mountPath": "/checkpoints"}}
    obj, model = job(checkpoint=ckpt)
    conf = conf_of(model, obj)
    assert conf[f"{PVC}.options.claimName"] == "stream-checkpoints"
    assert conf[f"{PVC}.mount.path"] == "/checkpoints"
    pod = resources.driver_pod(obj, model, ManagedSettings(), executors=2, max_executors=4)
    container = pod["spec"]["containers"][0]
    assert {"name": "checkpoint", "mountPath": "/checkpoints"} in container["volumeMounts"]
    assert {"name": "checkpoint", "persistentVolumeClaim": {"claimName": "stream-checkpoints"}} \
        in pod["spec"]["volumes"]


def test_an_object_store_checkpoints_keys_reach_driver_and_executors_from_the_secret() -> None:
    obj, model = job(checkpoint={"location": "s3a://checkpoints/wc",
                                 "credentials": {"secretName": "s3-keys"}})
    conf = conf_of(model, obj)
    assert {k: v for k, v in conf.items() if "secretKeyRef" in k} == {
        "spark.kubernetes.executor.secretKeyRef.AWS_ACCESS_KEY_ID": "s3-keys:AWS_ACCESS_KEY_ID",
        "spark.kubernetes.executor.secretKeyRef.AWS_SECRET_ACCESS_KEY":
            "s3-keys:AWS_SECRET_ACCESS_KEY",
    }
    assert not any(k.startswith(PVC) for k in conf)
    pod = resources.driver_pod(obj, model, ManagedSettings(), executors=1, max_executors=2)
    env = {e["name"]: e.get("valueFrom") for e in pod["spec"]["containers"][0]["env"]}
    assert env["AWS_ACCESS_KEY_ID"] == {"secretKeyRef": {"name": "s3-keys",
                                                         "key": "AWS_ACCESS_KEY_ID"}}
    assert env["AWS_SECRET_ACCESS_KEY"] == {"secretKeyRef": {"name": "s3-keys",
                                                             "key": "AWS_SECRET_ACCESS_KEY"}}
    assert [v["name"] for v in pod["spec"]["volumes"]] == ["manifest", "spark-auth"]
    # no keys named: the pods' own credential chain (a workload identity), nothing added
    obj, model = job(checkpoint={"location": "s3a://checkpoints/wc"})
    assert not any("secretKeyRef" in k for k in conf_of(model, obj))


def test_no_claim_no_checkpoint_volume() -> None:
    obj, model = job(checkpoint={"location": "/checkpoints/wc"})
    pod = resources.driver_pod(obj, model, ManagedSettings(), executors=1, max_executors=2)
    assert [v["name"] for v in pod["spec"]["volumes"]] == ["manifest", "spark-auth"]
    assert not any(k.startswith(PVC) for k in conf_of(model, obj))


@pytest.mark.parametrize(
    ("checkpoint", "executors", "message"),
    [
        ({"location": "/elsewhere/wc", "volume": {"claimName": "c", "mountPath": "/checkpoints"}},
         None, "must lie under volume.mountPath (/checkpoints)"),
        ({"location": "/ckX/wc", "volume": {"claimName": "c", "mountPath": "/ck"}},
         None, "must lie under volume.mountPath"),
        ({"location": "/c/wc", "volume": {"claimName": "Bad_Name", "mountPath": "/c"}},
         None, "claimName"),
        ({"location": "/c/wc", "credentials": {"secretName": "s3"}}, None,
         "credentials are for a checkpoint on an object store"),
        (None, {"cpu": "half"}, "cpu"),
        (None, {"cpuLimit": "-1"}, "cpuLimit"),
    ],
    ids=["outside-the-mount", "prefix-is-not-a-parent", "claim-name", "keys-for-a-path",
         "cpu-quantity",
         "negative-limit"],
)
def test_bad_pod_shapes_are_refused_naming_the_field(
    checkpoint: dict[str, Any] | None, executors: dict[str, Any] | None, message: str
) -> None:
    with pytest.raises(ValidationError) as e:
        job(executors=executors, checkpoint=checkpoint)
    assert message in str(e.value)


def test_placement_reaches_the_driver_and_the_executors() -> None:
    """The chart's sparkPods placement: the driver pod's nodeSelector and tolerations; for the
    executors Spark's node-selector conf, and the tolerations in the restricted executor pod
    template (Spark has no conf for them) shipped in the job's ConfigMap beside the manifest."""
    obj, model = job()
    tol = [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}]
    s = ManagedSettings(image="img:1", image_pull_policy="Never",
                        node_selector={"kubernetes.io/hostname": "n1"}, tolerations=tol,
                        driver_cpu="300m")
    pod = resources.driver_pod(obj, model, s, executors=1, max_executors=3)
    assert pod["spec"]["nodeSelector"] == {"kubernetes.io/hostname": "n1"}
    assert pod["spec"]["tolerations"] == tol
    c = pod["spec"]["containers"][0]
    assert c["imagePullPolicy"] == "Never" and c["resources"]["requests"]["cpu"] == "300m"
    manifest = resources.runner_manifest(model, resources.Names.of(obj), s, executors=1)
    conf = yaml.safe_load(manifest)["spec"]["spark"]["conf"]
    template = f"{resources.MANIFEST_DIR}/{resources.EXECUTOR_TEMPLATE_KEY}"
    assert conf["spark.kubernetes.node.selector.kubernetes.io/hostname"] == "n1"
    assert conf["spark.kubernetes.executor.podTemplateFile"] == template
    assert conf["spark.kubernetes.container.image.pullPolicy"] == "Never"
    data = resources.config_map(obj, manifest, s)["data"]
    assert yaml.safe_load(data[resources.EXECUTOR_TEMPLATE_KEY])["spec"]["tolerations"] == tol
    StreamJob.model_validate(yaml.safe_load(manifest))  # the runner accepts its own manifest
    plain = resources.config_map(obj, manifest, ManagedSettings())["data"]
    assert "tolerations" not in yaml.safe_load(plain[resources.EXECUTOR_TEMPLATE_KEY])["spec"]


def test_a_script_from_a_configmap_is_mounted_read_only_and_run_from_there() -> None:
    doc = {"apiVersion": "stream-autoscaler.io/v1alpha1", "kind": "StreamJob", "metadata": META,
           "spec": {"checkpoint": {"location": "/cp/wc"},
                    "application": {"configMap": "wc-script", "script": "wordcount.py",
                                    "args": ["/out"]}}}
    model = StreamJob.model_validate(doc)
    pod = resources.driver_pod(doc, model, ManagedSettings(), executors=1, max_executors=2)
    container = pod["spec"]["containers"][0]
    assert {"name": "application", "mountPath": resources.APPLICATION_DIR,
            "readOnly": True} in container["volumeMounts"]
    assert {"name": "application", "configMap": {"name": "wc-script"}} in pod["spec"]["volumes"]
    manifest = yaml.safe_load(
        resources.runner_manifest(model, resources.Names.of(doc), ManagedSettings(), 1))
    app = manifest["spec"]["application"]
    assert (app["script"], app["args"]) == (f"{resources.APPLICATION_DIR}/wordcount.py", ["/out"])
    assert "configMap" not in app
    # the manifest the driver runs is a valid job on its own (the path is absolute now)
    StreamJob.model_validate(manifest)


def test_a_script_in_the_image_mounts_nothing_more() -> None:
    doc = yaml.safe_load((REPO / "k8s" / "samples" / "streamjob-script.yaml").read_text())
    doc["metadata"] = META
    model = StreamJob.model_validate(doc)
    pod = resources.driver_pod(doc, model, ManagedSettings(), executors=1, max_executors=2)
    assert [v["name"] for v in pod["spec"]["volumes"]] == ["manifest", "spark-auth", "checkpoint"]


@pytest.mark.parametrize(
    ("checkpoint", "attach", "refused"),
    [
        ({"location": "/var/lib/checkpoints/wc"}, False, True),
        ({"location": "file:///var/lib/checkpoints/wc"}, False, True),
        ({"location": "hdfs://nn/checkpoints/wc"}, False, True),
        ({"location": "s3a://checkpoints/wc"}, False, False),
        ({"location": "s3a://checkpoints/wc", "credentials": {"secretName": "s3"}}, False, False),
        ({"location": "/ck/wc", "volume": {"claimName": "ck", "mountPath": "/ck"}}, False, False),
        ({"location": "/var/lib/checkpoints/wc"}, True, False),
    ],
    ids=["bare-path", "file-uri", "hdfs-not-read-by-the-runner", "object-store",
         "object-store-with-keys", "shared-claim", "attached"],
)
def test_in_a_cluster_a_managed_checkpoint_must_be_shared(
    checkpoint: dict[str, Any], attach: bool, refused: bool
) -> None:
    """The CRD's CEL rule, mirrored: validated for a cluster, a managed job whose checkpoint no
    executor pod can share is refused naming the field; outside a cluster (``runner --job``)
    the same manifest is a local job and a plain directory is fine."""
    doc, _ = job()
    doc = {**doc, "spec": {**doc["spec"], "checkpoint": checkpoint}}
    if attach:
        doc["spec"]["attach"] = {"controlUrl": "http://runner:8081",
                                 "metricsUrl": "http://runner:9108/metrics"}
    assert StreamJob.model_validate(doc).spec.checkpoint.location == checkpoint["location"]
    if not refused:
        StreamJob.model_validate(doc, context={CLUSTER_CONTEXT: True})
        return
    with pytest.raises(ValidationError) as e:
        StreamJob.model_validate(doc, context={CLUSTER_CONTEXT: True})
    lines = error_lines(StreamJob, e.value)
    assert lines == [f"spec: checkpoint.location ({checkpoint['location']}): {NOT_SHARED}"], lines
