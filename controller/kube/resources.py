"""The objects a managed StreamJob owns, as pure functions of the job (no API calls).

Usage::

    names = Names.of(job_obj)
    cm = config_map(job_obj, job_model, settings)     # the runner's manifest, Spark-on-K8s conf
    pod = driver_pod(job_obj, job_model, settings, executors=2, max_executors=8)

Everything carries an ownerReference to the StreamJob, so deleting the job deletes them (after
the finalizer has stopped the query at a batch boundary). The driver runs the runner with
``--master k8s://...``: Spark creates the executor pods under the drivers' ServiceAccount and
reaches the driver through the headless Service.

Least privilege (docs/security.md): a job sets only the allowed Spark settings
(``contracts.streamjob.ALLOWED_SPARK_CONF``), never the ones the controller owns
(``PROTECTED_SPARK_CONF``); the driver and executor pods meet the ``restricted`` Pod Security
Standard; Spark's RPC is authenticated and the UI cannot kill jobs; a NetworkPolicy lets only
the controller and Prometheus reach the driver's control and metrics ports, and only the job's
own executors its RPC ports.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

import yaml

from contracts.api import GROUP_VERSION
from contracts.runner_api import TOKEN_ENV
from contracts.streamjob import (
    CREDENTIAL_KEYS,
    IN_CLUSTER_MASTER,
    StreamJob,
    spark_conf_problem,
)
from controller.kube.settings import ManagedSettings

Obj = dict[str, Any]
JOB_LABEL = "stream-autoscaler.io/job"
TOKEN_KEY = "token"
MANIFEST_KEY = "job.yaml"
MANIFEST_DIR = "/etc/stream-autoscaler"
EXECUTOR_TEMPLATE_KEY = "executor-pod.yaml"
"""Spark's executor pod template, in the manifest ConfigMap beside the job (mounted in the
driver, which reads it when it creates executors)."""
APPLICATION_DIR = "/opt/stream-autoscaler/application"
"""Where the driver pod mounts ``spec.application.configMap`` (read-only)."""
APPLICATION_VOLUME = "application"
SPARK_AUTH_KEY = "secret"
SPARK_AUTH_DIR = "/etc/stream-autoscaler-spark-auth"
"""Where the driver and every executor mount the job's Spark RPC secret (the Secret
``<job>-spark-auth``): Spark reads it from ``spark.authenticate.secret.file`` and, with that set,
never puts it in an executor's environment, where anyone who may list the namespace's pods
would read it (``test_security.py::test_the_rpc_secret_is_a_file_never_a_pod_env``)."""
SPARK_AUTH_VOLUME = "spark-auth"
EXECUTOR_CONTAINER = "executor"
RUN_AS = 10001
"""The image's user and group (Dockerfile: ``USER 10001:10001``)."""


@dataclass(frozen=True)
class Names:
    """The names of a job's owned objects."""

    job: str
    namespace: str

    @staticmethod
    def of(obj: Obj) -> Names:
        return Names(obj["metadata"]["name"], obj["metadata"]["namespace"])

    @property
    def driver(self) -> str:
        return f"{self.job}-driver"

    @property
    def service(self) -> str:
        return f"{self.job}-driver-svc"

    @property
    def config_map(self) -> str:
        return f"{self.job}-manifest"

    @property
    def secret(self) -> str:
        return f"{self.job}-control-token"

    @property
    def spark_auth(self) -> str:
        return f"{self.job}-spark-auth"

    def host(self) -> str:
        return f"{self.service}.{self.namespace}.svc"

    def control_url(self, s: ManagedSettings) -> str:
        return f"http://{self.host()}:{s.control_port}"

    def metrics_url(self, s: ManagedSettings) -> str:
        return f"http://{self.host()}:{s.metrics_port}/metrics"


def owner_reference(obj: Obj) -> Obj:
    return {
        "apiVersion": GROUP_VERSION,
        "kind": "StreamJob",
        "name": obj["metadata"]["name"],
        "uid": obj["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def object_meta(obj: Obj, name: str, component: str) -> Obj:
    return {
        "name": name,
        "namespace": obj["metadata"]["namespace"],
        "labels": {
            "app.kubernetes.io/name": "stream-autoscaler",
            "app.kubernetes.io/component": component,
            "app.kubernetes.io/managed-by": "stream-autoscaler",
            JOB_LABEL: obj["metadata"]["name"],
        },
        "ownerReferences": [owner_reference(obj)],
    }


def owned_spark_conf(job: StreamJob, names: Names, s: ManagedSettings) -> dict[str, str]:
    """The settings the controller owns (each matches ``PROTECTED_SPARK_CONF``): where and as
    whom the pods run, their restricted shape, RPC authentication, no kill from the UI, and
    nothing that needs a verb the drivers' Role does not grant."""
    return {
        "spark.kubernetes.namespace": names.namespace,
        "spark.kubernetes.container.image": s.image,
        "spark.kubernetes.driver.pod.name": names.driver,
        "spark.kubernetes.authenticate.driver.serviceAccountName": s.spark_service_account,
        # executors call no API: the namespace's default ServiceAccount (Spark would give them
        # the driver's), which the drivers' admission policy requires of every executor
        "spark.kubernetes.authenticate.executor.serviceAccountName": "default",
        "spark.kubernetes.executor.podNamePrefix": names.job,
        # executors: the restricted template (non-root, no privilege escalation, no
        # capabilities, RuntimeDefault seccomp, no API token), labelled for the NetworkPolicy
        "spark.kubernetes.executor.podTemplateFile": f"{MANIFEST_DIR}/{EXECUTOR_TEMPLATE_KEY}",
        "spark.kubernetes.executor.podTemplateContainerName": EXECUTOR_CONTAINER,
        f"spark.kubernetes.executor.label.{JOB_LABEL}": names.job,
        # RPC authenticated with the job's own secret, read from a file in the driver and in
        # every executor (Spark's generated one would reach the executors in their pods'
        # environment, readable by whoever may list the namespace's pods)
        "spark.authenticate": "true",
        "spark.authenticate.secret.file": f"{SPARK_AUTH_DIR}/{SPARK_AUTH_KEY}",
        "spark.ui.killEnabled": "false",
        # what the drivers' Role is sized for (k8s/rbac/spark-driver.yaml): executors deleted
        # when they end (no label patch); no executor ConfigMap and no driver Service for Spark
        # to create or delete by label (deletecollection would reach our own objects)
        "spark.kubernetes.executor.deleteOnTermination": "true",
        "spark.kubernetes.executor.disableConfigMap": "true",
        "spark.kubernetes.driver.service.deleteOnTermination": "false",
        **checkpoint_volume_conf(job),
        **checkpoint_credentials_conf(job),
    }


def runner_manifest(job: StreamJob, names: Names, s: ManagedSettings, executors: int) -> str:
    """The StreamJob manifest the driver runs: the user's spec plus Spark-on-Kubernetes conf.

    The user's settings are the allowed ones only (``contracts.streamjob.ALLOWED_SPARK_CONF``):
    the model refuses any other in a StreamJob, and should one be stored anyway (an object
    older than the rule) it is dropped here, so it never reaches the driver's SparkConf.
    """
    user = {k: v for k, v in job.spec.spark.conf.items() if spark_conf_problem(k, v) is None}
    conf = {
        "spark.driver.host": names.host(),
        "spark.driver.bindAddress": "0.0.0.0",
        # Executors reach the driver through its headless Service name. Spark 4.3 defaults
        # to the driver pod's IP, which it takes from the bind address (0.0.0.0 here, so
        # every executor pod connected to 0.0.0.0:7078 and exited; SPARK-58748).
        "spark.kubernetes.executor.useDriverPodIP": "false",
        "spark.driver.port": str(s.driver_port),
        "spark.blockManager.port": str(s.block_manager_port),
        "spark.ui.port": str(s.ui_port),
        "spark.executor.instances": str(executors),
        "spark.kubernetes.container.image.pullPolicy": s.image_pull_policy,
        **{f"spark.kubernetes.node.selector.{k}": v for k, v in s.node_selector.items()},
        **executor_pod_conf(job),
        **user,
        **owned_spark_conf(job, names, s),
    }
    spark = job.spec.spark.model_copy(update={"master": IN_CLUSTER_MASTER, "conf": conf})
    update: dict[str, object] = {"spark": spark, "attach": None}
    app = job.spec.application
    if app is not None and app.config_map is not None and app.script is not None:
        # the driver runs the script where its pod mounts the ConfigMap
        update["application"] = app.model_copy(
            update={"script": f"{APPLICATION_DIR}/{app.script}", "config_map": None}
        )
    spec = job.spec.model_copy(update=update)
    doc = job.model_copy(update={"spec": spec, "status": None}).model_dump(
        by_alias=True, exclude_none=True, mode="json"
    )
    doc["metadata"] = {"name": names.job, "namespace": names.namespace}
    return yaml.safe_dump(doc, sort_keys=False)


CHECKPOINT_VOLUME = "checkpoint"
"""The name of the checkpoint volume in the driver pod and in Spark's executor volume conf."""


def executor_pod_conf(job: StreamJob) -> dict[str, str]:
    """Spark-on-Kubernetes settings for the executor pods' shape and shared checkpoint.

    CPU: ``spark.kubernetes.executor.request.cores`` / ``limit.cores`` (a limit is a CFS quota,
    so executors below one core share a node and a scale-out adds measurable capacity). Memory:
    Spark sets the pod's request and limit to heap + overhead. The checkpoint claim is mounted
    at the same path as in the driver pod, so every executor writes its state files there
    (:func:`checkpoint_volume_conf`, a setting the controller owns).
    """
    e, conf = job.spec.executors, {}
    if e.cpu is not None:
        conf["spark.kubernetes.executor.request.cores"] = e.cpu
    limit = e.cpu_limit or e.cpu
    if limit is not None:
        conf["spark.kubernetes.executor.limit.cores"] = limit
    if e.memory_overhead is not None:
        conf["spark.executor.memoryOverhead"] = e.memory_overhead
    return {**conf, **checkpoint_volume_conf(job)}


def checkpoint_volume_conf(job: StreamJob) -> dict[str, str]:
    """The checkpoint claim in every executor pod: the only volume a job's executors get."""
    vol, conf = job.spec.checkpoint.volume, {}
    if vol is not None:
        key = f"spark.kubernetes.executor.volumes.persistentVolumeClaim.{CHECKPOINT_VOLUME}"
        conf[f"{key}.options.claimName"] = vol.claim_name
        conf[f"{key}.mount.path"] = vol.mount_path
        conf[f"{key}.mount.readOnly"] = "false"
    return conf


def checkpoint_credentials_conf(job: StreamJob) -> dict[str, str]:
    """An object-store checkpoint's keys in every executor pod's environment, from the Secret
    the job names (Spark's ``spark.kubernetes.executor.secretKeyRef.ENV=secret:key``; the
    driver pod gets the same variables from :func:`checkpoint_credentials_env`)."""
    creds = job.spec.checkpoint.credentials
    if creds is None:
        return {}
    return {f"spark.kubernetes.executor.secretKeyRef.{key}": f"{creds.secret_name}:{key}"
            for key in CREDENTIAL_KEYS}


def checkpoint_credentials_env(job: StreamJob) -> list[Obj]:
    """The driver pod's environment for an object-store checkpoint's keys (Hadoop's S3A and
    the runner's checkpoint tools read them)."""
    creds = job.spec.checkpoint.credentials
    if creds is None:
        return []
    return [{"name": key, "valueFrom": {"secretKeyRef": {"name": creds.secret_name, "key": key}}}
            for key in CREDENTIAL_KEYS]


# --- Pod Security Standard "restricted" -----------------------------------------------------


def pod_security_context() -> Obj:
    """Non-root as the image's user; ``fsGroup`` lets it write the checkpoint claim."""
    return {
        "runAsNonRoot": True,
        "runAsUser": RUN_AS,
        "runAsGroup": RUN_AS,
        "fsGroup": RUN_AS,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def container_security_context() -> Obj:
    """No privilege escalation, no capabilities. The root filesystem stays writable: Spark and
    its Python workers write scratch files under /tmp and $HOME."""
    return {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "runAsNonRoot": True,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def spark_auth_volume(names: Names) -> Obj:
    """The job's RPC secret as a read-only file (group-readable: the pods' ``fsGroup``)."""
    return {"name": SPARK_AUTH_VOLUME, "secret": {
        "secretName": names.spark_auth, "defaultMode": 0o440,
        "items": [{"key": SPARK_AUTH_KEY, "path": SPARK_AUTH_KEY}]}}


SPARK_AUTH_MOUNT: Obj = {"name": SPARK_AUTH_VOLUME, "mountPath": SPARK_AUTH_DIR, "readOnly": True}


def executor_pod_template(names: Names, s: ManagedSettings | None = None) -> Obj:
    """Spark's executor pod template: Spark adds the image, command, env, ports, resources and
    volumes to the container named :data:`EXECUTOR_CONTAINER` and keeps the rest (here: the
    job's RPC secret as a file). Executors do not call the API server, so they get no
    ServiceAccount token. The chart's ``sparkPods.tolerations`` go here (Spark has no setting
    for them; its node selector is ``spark.kubernetes.node.selector.*``)."""
    tolerations = list(s.tolerations) if s is not None else []
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "spec": {
            "automountServiceAccountToken": False,
            "securityContext": pod_security_context(),
            "containers": [
                {"name": EXECUTOR_CONTAINER, "securityContext": container_security_context(),
                 "volumeMounts": [SPARK_AUTH_MOUNT]}
            ],
            "volumes": [spark_auth_volume(names)],
            **({"tolerations": tolerations} if tolerations else {}),
        },
    }


def config_map(obj: Obj, manifest: str, s: ManagedSettings | None = None) -> Obj:
    names = Names.of(obj)
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": object_meta(obj, names.config_map, "manifest"),
        "data": {
            MANIFEST_KEY: manifest,
            EXECUTOR_TEMPLATE_KEY: yaml.safe_dump(executor_pod_template(names, s),
                                                  sort_keys=False),
        },
    }


def _owned_secret(obj: Obj, name: str, component: str, data: dict[str, str]) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": object_meta(obj, name, component),
        "type": "Opaque",
        "stringData": data,
    }


def secret(obj: Obj) -> Obj:
    """The control token Secret; a new random token (an existing Secret is never replaced)."""
    return _owned_secret(obj, Names.of(obj).secret, "control-token",
                         {TOKEN_KEY: secrets.token_urlsafe(32)})


def spark_auth_secret(obj: Obj) -> Obj:
    """The job's Spark RPC secret: 32 random bytes, new per job (an existing Secret is never
    replaced, so a recreated driver and the executors it starts share it)."""
    return _owned_secret(obj, Names.of(obj).spark_auth, "spark-auth",
                         {SPARK_AUTH_KEY: secrets.token_hex(32)})


def service(obj: Obj, s: ManagedSettings) -> Obj:
    """Headless: executors reach the driver by DNS, the controller reaches its endpoints."""
    names = Names.of(obj)
    ports = [
        ("driver", s.driver_port),
        ("blockmanager", s.block_manager_port),
        ("ui", s.ui_port),
        ("control", s.control_port),
        ("metrics", s.metrics_port),
    ]
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": object_meta(obj, names.service, "driver"),
        "spec": {
            "clusterIP": "None",
            # the name resolves before the driver is Ready: its readiness probe answers only
            # once the runner has its first executors, and those resolve this name to register
            "publishNotReadyAddresses": True,
            "selector": {JOB_LABEL: names.job, "spark-role": "driver"},
            "ports": [{"name": n, "port": p, "targetPort": p} for n, p in ports],
        },
    }


def driver_pod(
    obj: Obj, job: StreamJob, s: ManagedSettings, executors: int, max_executors: int,
    state_partitions: int | None = None, max_records_per_batch: int | None = None,
) -> Obj:
    """The driver: ``stream-autoscaler runner`` in Spark-on-Kubernetes mode. ``state_partitions``:
    a recovery that restores with more state partitions (``runner --state-partitions``: the
    runner repartitions the checkpoint before its query starts); ``max_records_per_batch``: the
    recovery's admission cap (``runner --max-records-per-batch``)."""
    names = Names.of(obj)
    meta = object_meta(obj, names.driver, "driver")
    meta["labels"]["spark-role"] = "driver"
    mounts: list[Obj] = [{"name": "manifest", "mountPath": MANIFEST_DIR}, SPARK_AUTH_MOUNT]
    volumes: list[Obj] = [{"name": "manifest", "configMap": {"name": names.config_map}},
                          spark_auth_volume(names)]
    vol = job.spec.checkpoint.volume
    if vol is not None:  # the same claim, at the same path, as in every executor pod
        mounts.append({"name": CHECKPOINT_VOLUME, "mountPath": vol.mount_path})
        volumes.append(
            {"name": CHECKPOINT_VOLUME, "persistentVolumeClaim": {"claimName": vol.claim_name}}
        )
    app = job.spec.application
    if app is not None and app.config_map is not None:  # the user's script, read-only
        mounts.append(
            {"name": APPLICATION_VOLUME, "mountPath": APPLICATION_DIR, "readOnly": True}
        )
        volumes.append({"name": APPLICATION_VOLUME, "configMap": {"name": app.config_map}})
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {
            "serviceAccountName": s.spark_service_account,
            "restartPolicy": "Never",
            "securityContext": pod_security_context(),
            "containers": [
                {
                    "name": "runner",
                    "image": s.image,
                    "imagePullPolicy": s.image_pull_policy,
                    "args": [
                        "runner",
                        "--job", f"{MANIFEST_DIR}/{MANIFEST_KEY}",
                        "--master", IN_CLUSTER_MASTER,
                        "--bind", "0.0.0.0",
                        "--control-port", str(s.control_port),
                        "--metrics-port", str(s.metrics_port),
                        "--executors", str(executors),
                        "--max-executors", str(max_executors),
                        *(["--state-partitions", str(state_partitions)]
                          if state_partitions is not None else []),
                        *(["--max-records-per-batch", str(max_records_per_batch)]
                          if max_records_per_batch is not None else []),
                    ],
                    "env": [
                        {
                            "name": TOKEN_ENV,
                            "valueFrom": {
                                "secretKeyRef": {"name": names.secret, "key": TOKEN_KEY}
                            },
                        },
                        *checkpoint_credentials_env(job),
                    ],
                    "ports": [
                        {"name": "control", "containerPort": s.control_port},
                        {"name": "metrics", "containerPort": s.metrics_port},
                        {"name": "driver", "containerPort": s.driver_port},
                        {"name": "blockmanager", "containerPort": s.block_manager_port},
                        {"name": "ui", "containerPort": s.ui_port},
                    ],
                    "readinessProbe": {
                        "httpGet": {"path": "/healthz", "port": "control"},
                        "periodSeconds": 5,
                    },
                    "resources": {
                        "requests": {"cpu": s.driver_cpu, "memory": s.driver_memory}
                    },
                    "securityContext": container_security_context(),
                    "volumeMounts": mounts,
                }
            ],
            "volumes": volumes,
            **({"nodeSelector": dict(s.node_selector)} if s.node_selector else {}),
            **({"tolerations": list(s.tolerations)} if s.tolerations else {}),
        },
    }
