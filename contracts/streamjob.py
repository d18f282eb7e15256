"""The StreamJob model: one streaming job, the same YAML in a file and in the API server.

``spec`` says what to run (source, named operators, sink, trigger, checkpoint, starting
capacity) and which ScalingPolicy governs it; ``status`` is what the controller observed and
decided, including the bounded scaling history and the intent of an action in flight.
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, model_validator

from contracts.api import Model, ObjectMeta, SpecModel, cel
from contracts.history import ScalingHistory

Name = Annotated[
    str,
    Field(min_length=1, max_length=63, pattern=r"^[a-z][a-z0-9_-]*$", description="Operator name."),
]

# --- sources -------------------------------------------------------------------------------


class BurstSource(SpecModel):
    """Deterministic, rewindable records whose content is a pure function of their offset,
    arriving at the rate a trace CSV (``t,input_rate`` or ``t,load``) gives."""

    type: Literal["burst"] = "burst"
    trace: str = Field(
        min_length=1, max_length=4096, description="Path of the trace CSV (t,input_rate or t,load)."
    )
    keys: int = Field(
        default=10_000, ge=1, le=1_000_000_000, description="Distinct keys (count)."
    )
    skew: float = Field(
        default=0.0, ge=0, le=5, description="Zipf exponent of the key distribution; 0 = uniform."
    )
    partitions: int = Field(
        default=4, ge=1, le=4096, description="Source partitions per batch (count): read-stage cap."
    )
    load_unit_rate: float | None = Field(
        default=None,
        gt=0,
        le=1e9,
        description="Records/s that one `load` unit means (one executor's measured capacity). "
        "Required for a t,load trace unless the runner measures it.",
    )
    seed: int = Field(
        default=0,
        ge=0,
        le=2**53 - 1,
        description="Seed mixed into every record (deterministic; at most 2^53-1, the largest "
        "integer JSON carries exactly).",
    )
    max_records_per_batch: int | None = Field(
        default=None,
        ge=1,
        le=1_000_000_000,
        description="Cap on records per micro-batch (count); None = no cap.",
    )


class FileSource(SpecModel):
    """New files in a directory (JSON lines, CSV, text), read as a stream."""

    type: Literal["files"] = "files"
    path: str = Field(min_length=1, description="Directory watched for new files.")
    format: Literal["json", "csv", "text"] = Field(default="json", description="File format.")
    schema_ddl: str | None = Field(
        default=None,
        alias="schema",
        description="Spark DDL schema (e.g. 'user STRING, ts TIMESTAMP'); required for json/csv.",
    )
    max_files_per_trigger: int | None = Field(default=None, ge=1, description="Files per batch.")


class KafkaSource(SpecModel):
    """A Kafka topic (or topics)."""

    type: Literal["kafka"] = "kafka"
    bootstrap_servers: str = Field(description="host:port[,host:port].")
    topic: str = Field(description="Topic name, or a comma-separated list.")
    starting_offsets: Literal["earliest", "latest"] = Field(
        default="earliest", description="Where a new query starts."
    )
    max_offsets_per_trigger: int | None = Field(default=None, ge=1, description="Records/batch.")
    min_partitions: int | None = Field(
        default=None, ge=1, description="Split topic partitions into at least this many tasks."
    )


Source = Annotated[BurstSource | FileSource | KafkaSource, Field(discriminator="type")]

# --- operators -----------------------------------------------------------------------------


class ParseOp(SpecModel):
    """Parse a string column (JSON or CSV) into typed columns."""

    type: Literal["parse"] = "parse"
    name: Name
    format: Literal["json", "csv"] = Field(default="json", description="Input format.")
    schema_ddl: str = Field(alias="schema", description="Spark DDL schema of the parsed record.")
    column: str = Field(default="value", description="Column holding the text.")


class FilterOp(SpecModel):
    """Keep rows for which a Spark SQL boolean expression holds."""

    type: Literal["filter"] = "filter"
    name: Name
    condition: str = Field(min_length=1, description="Spark SQL boolean expression.")


class ProjectOp(SpecModel):
    """Select or compute columns with Spark SQL expressions (``selectExpr``)."""

    type: Literal["project"] = "project"
    name: Name
    columns: list[str] = Field(min_length=1, description="Spark SQL expressions.")


class Watermark(SpecModel):
    """Event-time watermark: how late a record may be and still count."""

    column: str = Field(description="Event-time column (TIMESTAMP).")
    delay: str = Field(default="10 seconds", description="Spark interval, e.g. '10 seconds'.")


class EventTimeWindow(SpecModel):
    """Tumbling (no slide) or sliding event-time window."""

    column: str = Field(description="Event-time column (TIMESTAMP).")
    duration: str = Field(description="Window length, e.g. '1 minute'.")
    slide: str | None = Field(default=None, description="Slide; None = tumbling.")


class Aggregation(SpecModel):
    """One aggregate per key."""

    fn: Literal["count", "sum", "avg", "min", "max"] = Field(description="Aggregate function.")
    column: str | None = Field(default=None, description="Input column; None only for count.")
    alias: str | None = Field(default=None, alias="as", description="Output column name.")

    @model_validator(mode="after")
    def _column(self) -> Aggregation:
        if self.fn != "count" and self.column is None:
            raise ValueError(f"aggregation {self.fn} needs a column")
        return self


class AggregateOp(SpecModel):
    """Keyed aggregation (stateful), optionally per event-time window."""

    type: Literal["aggregate"] = "aggregate"
    name: Name
    keys: list[str] = Field(min_length=1, description="Grouping columns.")
    aggregations: list[Aggregation] = Field(
        default_factory=lambda: [Aggregation(fn="count")], min_length=1
    )
    window: EventTimeWindow | None = Field(
        default=None, description="Event-time window, or None."
    )
    watermark: Watermark | None = Field(default=None, description="Required with a window.")

    @model_validator(mode="after")
    def _watermark(self) -> AggregateOp:
        if self.window is not None and self.watermark is None:
            raise ValueError("a windowed aggregation needs a watermark")
        return self


class DeduplicateOp(SpecModel):
    """Drop repeated rows by key (stateful)."""

    type: Literal["deduplicate"] = "deduplicate"
    name: Name
    columns: list[str] = Field(min_length=1, description="Columns that identify a duplicate.")
    watermark: Watermark | None = Field(default=None, description="Bounds the state, if given.")


class JoinSide(SpecModel):
    """The other stream of a stream-stream join: its own source and operators."""

    source: Source
    pipeline: list[ParseOp | FilterOp | ProjectOp] = Field(default_factory=list)
    watermark: Watermark = Field(description="Watermark of the other stream (required).")
    alias: str = Field(default="right", description="Alias to refer to it in the condition.")


class JoinOp(SpecModel):
    """Stream-stream join with a time bound (for example impressions x clicks)."""

    type: Literal["join"] = "join"
    name: Name
    right: JoinSide
    watermark: Watermark = Field(description="Watermark of this (left) stream.")
    alias: str = Field(default="left", description="Alias of this stream in the condition.")
    condition: str = Field(
        description="Spark SQL join condition with a time bound, e.g. 'left.ad = right.ad AND "
        "right.ts BETWEEN left.ts AND left.ts + interval 1 minute'."
    )
    how: Literal["inner", "leftOuter", "rightOuter"] = Field(default="inner")


class CustomOp(SpecModel):
    """A user operator: ``module:function`` taking (DataFrame, options) -> DataFrame."""

    type: Literal["custom"] = "custom"
    name: Name
    function: str = Field(pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$", description="module:function")
    stateful: bool = Field(default=False, description="Whether it keeps keyed state.")
    options: dict[str, str] = Field(default_factory=dict, description="Passed to the function.")


Operator = Annotated[
    ParseOp | FilterOp | ProjectOp | AggregateOp | DeduplicateOp | JoinOp | CustomOp,
    Field(discriminator="type"),
]

# --- sinks and the rest of the spec ---------------------------------------------------------


class Sink(SpecModel):
    """Where results go. ``files`` writes one directory per batch id (idempotent on replay)."""

    type: Literal["files", "memory", "console", "kafka", "noop"] = Field(default="files")
    path: str | None = Field(default=None, description="Output directory (files).")
    format: Literal["json", "parquet", "csv"] = Field(default="parquet")
    output_mode: Literal["append", "update", "complete"] = Field(default="update")
    bootstrap_servers: str | None = Field(default=None, description="Kafka sink: host:port.")
    topic: str | None = Field(default=None, description="Kafka sink topic.")

    @model_validator(mode="after")
    def _needs(self) -> Sink:
        if self.type == "files" and not self.path:
            raise ValueError("a files sink needs a path")
        if self.type == "kafka" and not (self.bootstrap_servers and self.topic):
            raise ValueError("a kafka sink needs bootstrapServers and topic")
        return self


class Trigger(SpecModel):
    """Micro-batch trigger."""

    interval_seconds: float = Field(
        default=1.0, ge=0, description="Trigger interval (s); 0 = next batch as soon as possible."
    )


class CheckpointVolume(SpecModel):
    """A PersistentVolumeClaim the controller mounts at the same path in the driver pod and in
    every executor pod (Spark's ``spark.kubernetes.{driver,executor}.volumes``): executors write
    state files into the checkpoint, and a replaced driver must find them."""

    claim_name: str = Field(
        min_length=1,
        max_length=253,
        pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$",
        description="PersistentVolumeClaim in the job's namespace (ReadWriteMany).",
    )
    mount_path: str = Field(
        pattern=r"^/.+",
        description="Where it is mounted in the driver and executor pods (absolute path).",
    )


class Checkpoint(SpecModel):
    """Where the query keeps offsets, commits and state (RocksDB). Immutable: the state lives
    there, and a job pointed elsewhere would silently start from nothing.

    In a cluster (managed mode) the driver and every executor read and write it, and it must
    outlive every pod: mount a shared claim (``volume``) under ``location``. The API server
    refuses a managed StreamJob whose checkpoint no executor could share (a CEL rule on the
    spec); locally (``runner --job``) a plain directory is fine.
    """

    model_config = ConfigDict(
        json_schema_extra=cel(("self.location == oldSelf.location", "location is immutable"))
    )

    location: str = Field(min_length=1, description="Checkpoint directory (path or URI).")
    volume: CheckpointVolume | None = Field(
        default=None,
        description="Shared claim mounted in the driver and executor pods; location must lie "
        "under its mountPath.",
    )

    @model_validator(mode="after")
    def _under_mount(self) -> Checkpoint:
        if self.volume is not None and not _under(self.location, self.volume.mount_path):
            raise ValueError(
                f"location ({self.location}) must lie under volume.mountPath "
                f"({self.volume.mount_path}): the checkpoint lives on the shared claim"
            )
        return self

    @property
    def shared(self) -> bool:
        """Whether every pod of a managed job can read and write it."""
        return self.volume is not None


def _under(path: str, mount: str) -> bool:
    mount = mount.rstrip("/")
    return path == mount or path.startswith(mount + "/")


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
        if (key.startswith(p[:-1]) if p.endswith("*") else key == p):
            return p
    return None


def _protected_cel() -> dict[str, Any]:
    """One CEL rule per :data:`PROTECTED_SPARK_CONF` entry, so the API server names it (a rule
    that names the offending key itself costs more than the API server allows for a map)."""
    rules = []
    for p in PROTECTED_SPARK_CONF:
        rule = (
            f"!self.conf.exists(k, k.startsWith({json.dumps(p[:-1])}))"
            if p.endswith("*") else f"!({json.dumps(p)} in self.conf)"
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


class SecretKeyRef(SpecModel):
    """A key in a Secret."""

    name: str
    key: str = "token"


class AttachSpec(SpecModel):
    """Attached mode: observe and scale a runner that already runs elsewhere."""

    control_url: str = Field(description="Base URL of the runner's control endpoint.")
    metrics_url: str = Field(description="URL of the runner's Prometheus /metrics.")
    token_secret_ref: SecretKeyRef | None = Field(default=None, description="Bearer token.")


class PolicyRef(SpecModel):
    """The ScalingPolicy that governs the job (same namespace)."""

    name: str = Field(default="default", description="ScalingPolicy name.")


class StreamJobSpec(SpecModel):
    """What to run and under which policy."""

    policy_ref: PolicyRef = Field(default_factory=PolicyRef)
    source: Source
    pipeline: list[Operator] = Field(min_length=1, description="Named operators, in order.")
    sink: Sink
    trigger: Trigger = Field(default_factory=Trigger)
    checkpoint: Checkpoint
    state_partitions: int = Field(
        default=4, ge=1, le=4096, description="State partitions at first start (count)."
    )
    executors: ExecutorSpec = Field(default_factory=ExecutorSpec)
    spark: SparkSpec = Field(default_factory=SparkSpec)
    attach: AttachSpec | None = Field(default=None, description="Attached mode, if set.")

    @model_validator(mode="after")
    def _names(self) -> StreamJobSpec:
        names = [op.name for op in self.pipeline]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"operator names must be unique; repeated: {', '.join(dupes)}")
        return self


MAX_JOB_NAME = 47
"""Spark's limit on spark.kubernetes.executor.podNamePrefix, which the controller sets to the
job's name."""
_DNS_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")

# --- status --------------------------------------------------------------------------------

Phase = Literal[
    "Pending", "Running", "Scaling", "Repartitioning", "Recovering", "Degraded", "Failed"
]


class Condition(Model):
    """A Kubernetes-style condition."""

    type: str
    status: Literal["True", "False", "Unknown"]
    reason: str = Field(pattern=r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")
    message: str = ""
    last_transition_time: str = Field(description="RFC 3339 time.")
    observed_generation: int | None = None


class ExecutorStatus(Model):
    """Executors now and the target the controller asked for."""

    current: int | None = None
    target: int | None = None


class DecisionRecord(Model):
    """The last decision, as shown in status, logs and Events."""

    time: float = Field(description="Unix time (s).")
    action: str
    reason: str
    message: str
    target_executors: int | None = None
    target_partitions: int | None = None
    enforced: bool = True


class ActionIntent(Model):
    """Written to status before an action starts, so a restarted controller resumes it."""

    action_id: str
    action: str
    target_executors: int | None = None
    target_partitions: int | None = None
    started_at: float = Field(description="Unix time (s).")


class StreamJobStatus(Model):
    """What the controller observed and decided."""

    phase: Phase = "Pending"
    observed_generation: int | None = None
    executors: ExecutorStatus = Field(default_factory=ExecutorStatus)
    executors_display: str | None = Field(default=None, description="'current/target'.")
    partitions: int | None = None
    input_rate: float | None = Field(default=None, description="Records/s arriving.")
    processed_rate: float | None = Field(default=None, description="Records/s processed.")
    lag_seconds: float | None = Field(default=None, description="Age of the backlog (s).")
    backlog_records: float | None = None
    bottleneck: str | None = None
    last_decision: DecisionRecord | None = None
    last_committed_batch: int | None = None
    resumed_from_batch: int | None = None
    intent: ActionIntent | None = None
    conditions: list[Condition] = Field(default_factory=list)
    history: ScalingHistory = Field(default_factory=ScalingHistory)


class StreamJob(Model):
    """A ``StreamJob`` manifest (apiVersion ``stream-autoscaler.io/v1alpha1``)."""

    api_version: Literal["stream-autoscaler.io/v1alpha1"] = Field(
        default="stream-autoscaler.io/v1alpha1", alias="apiVersion", description="API version."
    )
    kind: Literal["StreamJob"] = Field(default="StreamJob", description="StreamJob.")
    metadata: ObjectMeta
    spec: StreamJobSpec
    status: StreamJobStatus | None = None

    @model_validator(mode="after")
    def _name_fits_the_owned_objects(self) -> StreamJob:
        # The controller names the driver's headless Service "<name>-driver-svc" (a DNS-1035
        # label, <= 63) and Spark prefixes executor pods with the name (<= 47 characters).
        name = self.metadata.name
        if len(name) > MAX_JOB_NAME or not _DNS_LABEL.fullmatch(name):
            raise ValueError(
                f"metadata.name ({name[:80]!r}): a StreamJob name must be a DNS label of at most "
                f"{MAX_JOB_NAME} characters (lowercase letters, digits and '-', starting with a "
                "letter): it names the driver's Service and prefixes every executor pod"
            )
        return self
