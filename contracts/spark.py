"""A StreamJob's Spark side: executor shape and the Spark settings a job may (not) set.

Part of the StreamJob contract (:mod:`contracts.streamjob` re-exports every name).
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Any

from pydantic import ConfigDict, Field, StringConstraints, ValidationInfo, model_validator

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


CLUSTER_CONTEXT = "in_cluster"
"""Validation context key: validate as the API server does for a job it runs in pods
(``StreamJob.model_validate(doc, context={CLUSTER_CONTEXT: True})``), where the CRD's CEL
rules hold; a local ``runner --job`` may checkpoint to a plain directory."""

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
    # the JVMs' flags before the job's own (the image's class archive, operators/query/session.py)
    "spark.driver.defaultJavaOptions",
    "spark.executor.defaultJavaOptions",
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
SPARK_CONF_MAX_VALUE = 4096
"""Characters in one setting's value: bounds the JVM-options rule's cost in the CRD."""

ALLOWED_SPARK_CONF: tuple[str, ...] = (
    # SQL: shuffle partitions, adaptive execution, Arrow, the state store (RocksDB required)
    "spark.sql.*",
    # shuffle, memory, serialization, compression, storage of blocks
    "spark.shuffle.*",
    "spark.memory.*",
    "spark.serializer",
    "spark.kryo.*",
    "spark.kryoserializer.*",
    "spark.io.compression.*",
    "spark.rdd.compress",
    "spark.checkpoint.compress",
    "spark.broadcast.*",
    "spark.storage.*",
    "spark.cleaner.*",
    # scheduling and fault tolerance of tasks (not of executors: the controller scales those)
    "spark.default.parallelism",
    "spark.task.maxFailures",
    "spark.locality.wait*",
    "spark.speculation*",
    "spark.network.timeout",
    "spark.network.crypto.*",
    "spark.io.encryption.*",
    "spark.rpc.askTimeout",
    "spark.rpc.message.maxSize",
    "spark.executor.heartbeatInterval",
    "spark.executor.pyspark.memory",
    "spark.driver.maxResultSize",
    "spark.python.worker.*",
    # connectors: S3A (a checkpoint on s3a://), Kafka's consumer and producer pools
    "spark.hadoop.fs.s3a.*",
    "spark.kafka.consumer.*",
    "spark.kafka.producer.*",
    # the UI's memory (never its port or its kill links)
    "spark.ui.retained*",
    "spark.ui.showConsoleProgress",
    # JVM flags, each one from JVM_OPTION_PATTERNS (never -D: see jvm_options_problem)
    "spark.driver.extraJavaOptions",
    "spark.executor.extraJavaOptions",
)
"""The Spark settings a StreamJob's ``spark.conf`` may set: what a job needs to tune its SQL,
shuffle, memory, serializer, connectors and JVM, and nothing that shapes pods, mounts,
identities, networking, the executor count or the classpath. An allowlist, not a denylist:
Spark reads settings from many places (``-D`` flags become SparkConf defaults; pod templates,
feature steps, labels and node selectors each shape an executor pod), so a denylist misses the
next one. ``*`` ends a prefix; every prefix ends at a dot or names one setting's family, so a
key that smuggles ``=`` (spark-submit splits at the first one) still names an allowed setting.
Declared once: the model's validator and the CRD's CEL rule are built from it
(tests/unit/kube/test_security.py::test_every_bypass_is_refused_naming_the_key)."""

JVM_OPTION_PATTERNS: tuple[str, ...] = (
    r"-XX:[+-](UseG1GC|UseZGC|ZGenerational|UseParallelGC|UseSerialGC|UseShenandoahGC"
    r"|ParallelRefProcEnabled|UseStringDeduplication|AlwaysPreTouch|UseCompressedOops"
    r"|UseNUMA|ExitOnOutOfMemoryError|CrashOnOutOfMemoryError|PrintFlagsFinal)",
    r"-XX:(MaxGCPauseMillis|ParallelGCThreads|ConcGCThreads|InitiatingHeapOccupancyPercent"
    r"|G1HeapRegionSize|G1ReservePercent|MaxDirectMemorySize|MaxMetaspaceSize"
    r"|ReservedCodeCacheSize|MaxTenuringThreshold|NewRatio|SurvivorRatio"
    r"|ActiveProcessorCount)=[0-9]{1,12}[kKmMgG]?",
    r"-XX:[+-]TieredCompilation",
    r"-XX:TieredStopAtLevel=[0-4]",
    r"-Xss[0-9]{1,9}[kKmMgG]?",
    r"-Xmn[0-9]{1,9}[kKmMgG]?",
    r"-verbose:gc",
    r"-Xlog:gc[*]?(:stdout|:stderr)?",
)
"""The JVM flags ``spark.{driver,executor}.extraJavaOptions`` may carry: garbage collection,
the JIT's tiers (C1 alone spares a half-CPU executor the C2 compiler's threads), stack and
memory pools, GC logs to the container's own output. Never ``-D`` (a system property
becomes a SparkConf default, so ``-Dspark.kubernetes.executor.secrets.x=/m`` would mount any
Secret), never an agent, a classpath, a file to write, or a diagnostic unlock."""

_JVM_OPTIONS = re.compile(r"^\s*((" + "|".join(JVM_OPTION_PATTERNS) + r")(\s+|$))*$")
_JVM_OPTION = re.compile("^(" + "|".join(JVM_OPTION_PATTERNS) + ")$")
_SPARK_KEY = re.compile(r"^spark\.[A-Za-z0-9_.-]{1,250}$")
_FIELD_FOR = {
    "spark.executor.instances": "the controller sets the executor count (spec.executors.initial "
    "to start)",
    "spark.dynamicAllocation.": "the controller scales executors; Spark's dynamic allocation "
    "would fight it",
    "spark.executor.cores": "spec.executors.cores",
    "spark.executor.memory": "spec.executors.memory (memoryOverhead beside it)",
    "spark.kubernetes.executor.request.cores": "spec.executors.cpu",
    "spark.kubernetes.executor.limit.cores": "spec.executors.cpuLimit",
}
"""Where a refused setting has a field of its own, the refusal names the field."""


def _matches(key: str, entry: str) -> bool:
    return key.startswith(entry[:-1]) if entry.endswith("*") else key == entry


def protected_spark_key(key: str) -> str | None:
    """The entry of :data:`PROTECTED_SPARK_CONF` that ``key`` matches, else None."""
    for p in PROTECTED_SPARK_CONF:
        if _matches(key, p):
            return p
    return None


def jvm_options_problem(value: str) -> str | None:
    """Why a JVM options value is refused (naming the first flag outside
    :data:`JVM_OPTION_PATTERNS`), or None."""
    for flag in value.split():
        if not _JVM_OPTION.match(flag):
            why = ("a system property becomes a Spark setting" if flag.startswith("-D")
                   else "not a vetted GC, stack or memory flag")
            return f"JVM flag {flag[:80]!r} is not allowed ({why}; docs/security.md)"
    return None


def spark_conf_problem(key: str, value: str) -> str | None:
    """Why a StreamJob may not set ``key`` (to ``value``), or None: the setting is on
    :data:`ALLOWED_SPARK_CONF` and, for JVM options, every flag is vetted."""
    if (p := protected_spark_key(key)) is not None:
        return f"{key} ({p}): the controller owns it (docs/security.md)"
    if not any(_matches(key, a) for a in ALLOWED_SPARK_CONF):
        hint = next((f"; use {f}" for k, f in _FIELD_FOR.items()
                     if key == k or (k.endswith(".") and key.startswith(k))), "")
        return (f"{key} is not a setting a StreamJob may set: it shapes pods, mounts, "
                f"identities, networking or the executor count{hint} (the allowed settings: "
                "docs/security.md)")
    if not _SPARK_KEY.match(key):
        return (f"{key[:80]!r} is not a Spark setting's name (spark. followed by letters, "
                "digits, '.', '_' or '-': spark-submit would split it at '=')")
    if key.endswith("JavaOptions"):
        return jvm_options_problem(value)
    return None


def _allowed_cel() -> dict[str, Any]:
    """The CRD's mirror of :func:`spark_conf_problem`: every key on the allowlist, and the
    JVM options made of vetted flags only (values are bounded, so the rules' cost is)."""
    keys = " || ".join(
        f"k.startsWith({json.dumps(a[:-1])})" if a.endswith("*") else f"k == {json.dumps(a)}"
        for a in ALLOWED_SPARK_CONF
    )
    rules = [(f"self.conf.all(k, {keys})",
              "conf may set only the allowed Spark settings: nothing that shapes pods, mounts, "
              "identities, networking or the executor count (docs/security.md)")]
    for key in ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions"):
        rules.append((
            f"!({json.dumps(key)} in self.conf) || "
            f"self.conf[{json.dumps(key)}].matches({json.dumps(_JVM_OPTIONS.pattern)})",
            f"conf {key} may carry only vetted GC, stack and memory flags, never -D "
            "(docs/security.md)"))
    return cel(*rules)


class SparkSpec(SpecModel):
    """How to reach Spark, and extra configuration."""

    model_config = ConfigDict(json_schema_extra=_allowed_cel())

    master: str | None = Field(
        default=None, description="Spark master URL; None = the runner's own local mini-cluster."
    )
    conf: dict[str, Annotated[str, StringConstraints(max_length=SPARK_CONF_MAX_VALUE)]] = Field(
        default_factory=dict,
        max_length=SPARK_CONF_MAX_ENTRIES,
        description="Extra spark.* settings, from the allowed ones only: SQL, shuffle, memory, "
        "serializer, S3A, Kafka pools, vetted JVM flags (docs/security.md).",
    )

    @model_validator(mode="after")
    def _allowed(self, info: ValidationInfo) -> SparkSpec:
        """In a cluster (the API server's CEL, the controller, ``validate --cluster``) only
        the allowed settings; on one's own machine (``runner --job``, the demo) anything but
        what the controller owns: there the executors are the user's own processes, and a
        local job may hand them its S3 keys through ``spark.executorEnv.*``."""
        cluster = bool(info.context and info.context.get(CLUSTER_CONTEXT))
        if self.master == IN_CLUSTER_MASTER and not cluster:
            return self  # the controller's own manifest for its driver, read by the runner
        if cluster:
            refused = [p for k, v in sorted(self.conf.items())
                       if (p := spark_conf_problem(k, v)) is not None]
        else:
            refused = [f"{k} ({p}): the controller owns it (docs/security.md)"
                       for k in sorted(self.conf) if (p := protected_spark_key(k)) is not None]
        if refused:
            raise ValueError("conf: " + "; ".join(refused))
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
