"""A StreamJob's Spark side: executor shape and the Spark settings a job may (not) set.

Part of the StreamJob contract (:mod:`contracts.streamjob` re-exports every name).
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import ConfigDict, Field, model_validator

from contracts.api import SpecModel, cel

_QUANTITY = r"^([1-9][0-9]{0,5}m|[0-9]{1,3}(\.[0-9]{1,3})?)$"
"""A Kubernetes CPU quantity: millicores (``500m``) or cores (``1``, ``0.5``)."""
_MEMORY = r"^[1-9][0-9]{0,9}[kmgt]?$"
"""A JVM memory size: digits (MiB) or with a k/m/g/t suffix; never 0."""
_MIN_HEAP_BYTES = 450 * 2**20
"""Spark refuses an executor heap under 1.5 x its 300 MiB reserve (471,859,200 bytes)."""
_MAX_HEAP_BYTES = 2**40
"""1 TiB: beyond any executor a node can hold."""


def jvm_bytes(size: str) -> int:
    """``512m`` -> bytes (no suffix means MiB, as Spark reads spark.executor.memory)."""
    unit = {"k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}.get(size[-1], 0)
    return int(size[:-1]) * unit if unit else int(size) * 2**20


def cpu_cores(quantity: str) -> float:
    """A Kubernetes CPU quantity as cores: ``250m`` -> 0.25, ``1.5`` -> 1.5 (ValueError if it
    is neither)."""
    return int(quantity[:-1]) / 1000 if quantity.endswith("m") else float(quantity)


class ExecutorSpec(SpecModel):
    """Starting capacity and executor shape."""

    initial: int = Field(default=1, ge=0, le=1000, description="Executors at start (count).")
    cores: int = Field(default=1, ge=1, le=64, description="Cores (task slots) per executor.")
    memory: str = Field(
        default="512m",
        pattern=_MEMORY,
        description="Executor heap, Spark format (at least 450m: Spark reserves 300 MiB and "
        "refuses less than 1.5 times that).",
    )
    cpu: str | None = Field(
        default=None,
        pattern=_QUANTITY,
        description="Executor pod CPU request (Kubernetes quantity, e.g. '500m'); None = "
        "Spark's default (the cores). Below one core lets several executors share a node.",
    )
    cpu_limit: str | None = Field(
        default=None,
        pattern=_QUANTITY,
        description="Executor pod CPU limit (a CFS quota); None = the request when set, else "
        "no limit.",
    )
    memory_overhead: str | None = Field(
        default=None,
        pattern=_MEMORY,
        description="Executor pod memory beyond the heap (Spark format); None = Spark's "
        "default (10%, at least 384m). Pod memory request = limit = memory + overhead.",
    )

    def cpu_limit_cores(self) -> float | None:
        """The executor's CPU limit in cores (``250m`` -> 0.25): ``cpuLimit``, else ``cpu``,
        else None (no limit). The pods get it as a CFS quota; so do the demo's executors."""
        quantity = self.cpu_limit or self.cpu
        return None if quantity is None else cpu_cores(quantity)

    @model_validator(mode="after")
    def _heap(self) -> ExecutorSpec:
        heap = jvm_bytes(self.memory)
        if not _MIN_HEAP_BYTES <= heap <= _MAX_HEAP_BYTES:
            raise ValueError(
                f"memory ({self.memory}) must be between 450m and 1t: Spark refuses an executor "
                "heap under 450m"
            )
        return self


IN_CLUSTER_MASTER = "k8s://https://kubernetes.default.svc"
"""The master of a managed job's driver: the one manifest that may carry protected settings
(the controller writes it; the API server refuses them in every StreamJob, whatever its master)."""

PROTECTED_SPARK_CONF: tuple[str, ...] = (
    # where and as whom the pods run: the controller's image, namespace, ServiceAccount, names
    "spark.master",
    "spark.submit.deployMode",
    "spark.kubernetes.namespace",
    "spark.kubernetes.driver.master",  # where the drivers' token is sent
    "spark.kubernetes.trust.certificates",
    "spark.kubernetes.container.image*",
    "spark.kubernetes.driver.container.image*",
    "spark.kubernetes.executor.container.image*",
    "spark.kubernetes.authenticate.*",
    "spark.kubernetes.driver.pod.name",
    "spark.kubernetes.executor.podNamePrefix",
    # the pods' shape: the controller's restricted templates, its checkpoint claim, no Secrets
    "spark.kubernetes.driver.podTemplate*",
    "spark.kubernetes.executor.podTemplate*",
    "spark.kubernetes.driver.volumes.*",
    "spark.kubernetes.executor.volumes.*",
    "spark.kubernetes.driver.secrets.*",
    "spark.kubernetes.executor.secrets.*",
    "spark.kubernetes.driver.secretKeyRef.*",
    "spark.kubernetes.executor.secretKeyRef.*",
    "spark.kubernetes.driver.label.stream-autoscaler.io/*",  # NetworkPolicy peers
    "spark.kubernetes.executor.label.stream-autoscaler.io/*",
    # what would need verbs the drivers' Role does not grant (docs/security.md)
    "spark.kubernetes.allocation.pods.allocator",
    "spark.kubernetes.executor.deleteOnTermination",
    "spark.kubernetes.executor.disableConfigMap",
    "spark.kubernetes.executor.decommissionLabel*",
    "spark.kubernetes.driver.service.deleteOnTermination",
    "spark.kubernetes.driver.ownPersistentVolumeClaim",
    "spark.kubernetes.driver.reusePersistentVolumeClaim",
    "spark.kubernetes.driver.waitToReusePersistentVolumeClaim",
    "spark.kubernetes.driver.annotateExitException",
    # RPC authentication and the UI's kill links
    "spark.authenticate*",
    "spark.ui.killEnabled",
)
"""Spark settings a StreamJob's ``spark.conf`` may not set: the controller sets them for a
managed driver (``controller/kube/resources.py``), and a job author who could would swap the
image or ServiceAccount, mount host paths or a neighbour's Secret or claim, or turn RPC
authentication off. ``*`` ends a prefix. Declared once: the model's validator and the CRD's CEL
rule are built from it."""

SPARK_CONF_MAX_ENTRIES = 256
"""Bounds the CEL rule's cost (the API server refuses a rule it cannot bound)."""


def protected_spark_key(key: str) -> str | None:
    """The entry of :data:`PROTECTED_SPARK_CONF` that ``key`` matches, else None."""
    for p in PROTECTED_SPARK_CONF:
        if key.startswith(p[:-1]) if p.endswith("*") else key == p:
            return p
    return None


def _protected_cel() -> dict[str, Any]:
    """One CEL rule per :data:`PROTECTED_SPARK_CONF` entry, so the API server names it (a rule
    that names the offending key itself costs more than the API server allows for a map)."""
    rules = []
    for p in PROTECTED_SPARK_CONF:
        rule = (
            f"!self.conf.exists(k, k.startsWith({json.dumps(p[:-1])}))"
            if p.endswith("*")
            else f"!({json.dumps(p)} in self.conf)"
        )
        rules.append((rule, f"conf may not set {p}: the controller owns it (docs/security.md)"))
    return cel(*rules)


class SparkSpec(SpecModel):
    """How to reach Spark, and extra configuration."""

    model_config = ConfigDict(json_schema_extra=_protected_cel())

    master: str | None = Field(
        default=None, description="Spark master URL; None = the runner's own local mini-cluster."
    )
    conf: dict[str, str] = Field(
        default_factory=dict,
        max_length=SPARK_CONF_MAX_ENTRIES,
        description="Extra spark.* settings; not the ones the controller owns (docs/security.md).",
    )

    @model_validator(mode="after")
    def _protected(self) -> SparkSpec:
        if self.master == IN_CLUSTER_MASTER:  # the controller's own manifest for its driver
            return self
        refused = sorted(
            f"{k} ({p})" if p != k else k
            for k in self.conf
            if (p := protected_spark_key(k)) is not None
        )
        if refused:
            raise ValueError(
                f"conf may not set {', '.join(refused)}: the controller owns "
                f"{'this setting' if len(refused) == 1 else 'these settings'} "
                "(docs/security.md)"
            )
        return self

    @model_validator(mode="after")
    def _rocksdb(self) -> SparkSpec:
        provider = self.conf.get("spark.sql.streaming.stateStore.providerClass")
        if provider and "RocksDB" not in provider:
            raise ValueError(
                f"spark.sql.streaming.stateStore.providerClass ({provider}) must be the RocksDB "
                "provider: state repartition needs it"
            )
        return self
