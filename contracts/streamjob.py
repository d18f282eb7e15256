"""The StreamJob model: one streaming job, the same YAML in a file and in the API server.

``spec`` says what to run — either our YAML pipeline (source, named operators, sink) or the
user's own PySpark ``application`` (a script or a function, run unmodified) — with the trigger,
checkpoint and starting capacity, and which ScalingPolicy governs it; ``status`` is what the
controller observed and decided, including the bounded scaling history and the intent of an
action in flight.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from pydantic import ConfigDict, Field, ValidationInfo, model_validator

from contracts.api import Model, ObjectMeta, SpecModel, cel
from contracts.history import ScalingHistory
from contracts.pipeline import (
    AggregateOp,
    Aggregation,
    CustomOp,
    DeduplicateOp,
    EventTimeWindow,
    FilterOp,
    JoinOp,
    JoinSide,
    Name,
    Operator,
    ParseOp,
    ProjectOp,
    Watermark,
)
from contracts.sources import BurstSource, FileSource, KafkaSource, Source
from contracts.spark import (
    ALLOWED_SPARK_CONF,
    CLUSTER_CONTEXT,
    IN_CLUSTER_MASTER,
    PROTECTED_SPARK_CONF,
    SPARK_CONF_MAX_ENTRIES,
    ExecutorSpec,
    SparkSpec,
    jvm_bytes,
    protected_spark_key,
    spark_conf_problem,
)

__all__ = [
    "ALLOWED_SPARK_CONF", "CLUSTER_CONTEXT", "IN_CLUSTER_MASTER", "PROTECTED_SPARK_CONF",
    "SPARK_CONF_MAX_ENTRIES", "ActionIntent",
    "AggregateOp", "Aggregation", "Application", "AttachSpec", "BurstSource", "Checkpoint",
    "CheckpointVolume",
    "Condition", "CustomOp", "DecisionRecord", "DeduplicateOp", "EventTimeWindow",
    "ExecutorSpec", "ExecutorStatus", "FileSource", "FilterOp", "JoinOp", "JoinSide",
    "KafkaSource", "Name", "Operator", "ParseOp", "PolicyRef", "ProjectOp", "SecretKeyRef",
    "Sink", "Source", "SparkSpec", "StreamJob", "StreamJobSpec", "StreamJobStatus", "Trigger",
    "Watermark", "jvm_bytes", "protected_spark_key", "spark_conf_problem",
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


SYSTEM_DIRECTORIES: tuple[str, ...] = (
    "/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/root",
    "/run", "/sbin", "/sys", "/usr", "/var/run", "/opt/venv", "/opt/stream-autoscaler",
    "/var/data",
)
"""Where a job's claim may not be mounted, nor below: the system's and the image's own
directories (``/var/run/secrets`` holds the pod's ServiceAccount token, ``/etc`` the resolver
and passwd, ``/opt/venv`` and ``/opt/stream-autoscaler`` the runner and the job's script,
``/var/data`` Spark's local directories); a claim mounted there would shadow what the pod runs
(tests/unit/contracts/test_strict_models.py::test_a_mount_path_may_not_shadow_the_system)."""
_MOUNT_PATH = r"^(/[A-Za-z0-9_-][A-Za-z0-9._-]*)+/?$"
"""Absolute, plain segments: no '.' or '..' (which would walk into a system directory), no
'//', nothing a shell or a URL reads differently."""


def _mount_rules() -> dict[str, Any]:
    inside = " || ".join(f"self.mountPath == {json.dumps(d)} || self.mountPath.startsWith("
                         f"{json.dumps(d + '/')})" for d in SYSTEM_DIRECTORIES)
    return cel((f"!({inside})", "mountPath may not be a system directory or lie under one "
                f"({', '.join(SYSTEM_DIRECTORIES)})"))


class CheckpointVolume(SpecModel):
    """A PersistentVolumeClaim the controller mounts at the same path in the driver pod and in
    every executor pod (Spark's ``spark.kubernetes.{driver,executor}.volumes``): executors write
    state files into the checkpoint, and a replaced driver must find them."""

    model_config = ConfigDict(json_schema_extra=_mount_rules())

    claim_name: str = Field(
        min_length=1,
        max_length=253,
        pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$",
        description="PersistentVolumeClaim in the job's namespace (ReadWriteMany), labelled "
        "stream-autoscaler.io/job-reference=true.",
    )
    mount_path: str = Field(
        pattern=_MOUNT_PATH, max_length=1024,
        description="Where it is mounted in the driver and executor pods (absolute path; not "
        "a system directory such as /etc, /usr or /var/run, nor below one).",
    )

    @model_validator(mode="after")
    def _not_a_system_directory(self) -> CheckpointVolume:
        path = self.mount_path.rstrip("/")
        hit = next((d for d in SYSTEM_DIRECTORIES if path == d or path.startswith(d + "/")),
                   None)
        if hit is not None:
            raise ValueError(f"mountPath ({self.mount_path}) may not be {hit} or lie under it: "
                             "it would shadow what the pod runs")
        return self


OBJECT_STORE_PREFIX = "s3a://"
"""A checkpoint location on an object store (Hadoop's S3A file system): shared by every pod
and outliving them without a claim."""
CREDENTIAL_KEYS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")
"""The keys of ``checkpoint.credentials.secretName``: given to the driver and executor pods as
these environment variables, which Hadoop's S3A default credential chain and the runner's
checkpoint tools (pyarrow) both read."""


class CheckpointCredentials(SpecModel):
    """Where the pods find the object store's credentials (never in the manifest itself)."""

    secret_name: str = Field(
        min_length=1,
        max_length=253,
        pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$",
        description="Secret in the job's namespace with the keys AWS_ACCESS_KEY_ID and "
        "AWS_SECRET_ACCESS_KEY, set as those environment variables in the driver and executor "
        "pods; labelled stream-autoscaler.io/job-reference=true.",
    )


class Checkpoint(SpecModel):
    """Where the query keeps offsets, commits and state (RocksDB). Immutable: the state lives
    there, and a job pointed elsewhere would silently start from nothing.

    In a cluster (managed mode) the driver and every executor read and write it, and it must
    outlive every pod: mount a shared claim (``volume``) under ``location``, or put it on an
    object store (``s3a://BUCKET/path``; the endpoint and other ``fs.s3a`` settings in
    ``spark.conf`` as ``spark.hadoop.fs.s3a.*``, the keys in the Secret ``credentials`` names).
    Without either it is refused there (the API server's CEL rule; the controller's
    ``SpecInvalid`` for an object that predates it): state would stay on the pods' own disks,
    lost with them. Locally (``runner --job``) a plain directory is fine.
    """

    model_config = ConfigDict(
        json_schema_extra=cel(
            ("self.location == oldSelf.location", "location is immutable"),
            ("!has(self.volume) || (self.location + '/').startsWith("
             "self.volume.mountPath.endsWith('/') ? self.volume.mountPath : "
             "self.volume.mountPath + '/')",
             "location must lie under volume.mountPath: the checkpoint lives on the shared claim"),
            (f"!has(self.credentials) || self.location.startsWith('{OBJECT_STORE_PREFIX}')",
             "credentials are for a checkpoint on an object store (an s3a:// location)"),
        )
    )

    location: str = Field(
        min_length=1, max_length=1024,
        description="Checkpoint directory: a path, or s3a://BUCKET/path on an object store.")
    volume: CheckpointVolume | None = Field(
        default=None,
        description="Shared claim mounted in the driver and executor pods; location must lie "
        "under its mountPath.",
    )
    credentials: CheckpointCredentials | None = Field(
        default=None,
        description="The object store's keys, from a Secret (s3a:// locations only; without it "
        "the pods' own credential chain is used, e.g. a workload identity).",
    )

    @model_validator(mode="after")
    def _under_mount(self) -> Checkpoint:
        if self.volume is not None and not _under(self.location, self.volume.mount_path):
            raise ValueError(
                f"location ({self.location}) must lie under volume.mountPath "
                f"({self.volume.mount_path}): the checkpoint lives on the shared claim"
            )
        if self.credentials is not None and not self.on_object_store:
            raise ValueError(
                f"checkpoint.credentials are for a checkpoint on an object store (an s3a:// "
                f"location), not {self.location}"
            )
        return self

    @property
    def on_object_store(self) -> bool:
        return self.location.startswith(OBJECT_STORE_PREFIX)

    @property
    def shared(self) -> bool:
        """Whether every pod of a managed job can read and write it: a claim mounted in all,
        or an object store."""
        return self.volume is not None or self.on_object_store




def _under(path: str, mount: str) -> bool:
    mount = mount.rstrip("/")
    return path == mount or path.startswith(mount + "/")


APPLICATION_FUNCTION = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


class Application(SpecModel):
    """The user's own PySpark job, run unmodified (docs/applications.md).

    ``script``: a file that builds a SparkSession with ``SparkSession.builder.getOrCreate()``
    and starts one streaming query (``spark.readStream ... .writeStream ... .start()``), as
    Spark's own examples do; it runs as ``__main__`` with ``args`` as ``sys.argv[1:]``.
    ``module``: ``pkg.mod:function``, called with the SparkSession and ``options``; it returns a
    ``DataStreamWriter``, a started query, or a streaming DataFrame (written to ``spec.sink``).
    Either way the runner owns the session, the checkpoint (``spec.checkpoint.location``) and the
    trigger, and restarts the job from its checkpoint after a repartition or a recovery.
    """

    model_config = ConfigDict(
        json_schema_extra=cel(
            ("has(self.script) != has(self.module)", "set exactly one of script or module"),
            ("!has(self.args) || size(self.args) == 0 || has(self.script)",
             "args are a script's; a module function takes options"),
            ("!has(self.configMap) || (has(self.script) && !self.script.contains('/'))",
             "with configMap, script is the key of the ConfigMap that holds the script "
             "(a file name, no '/')"),
        )
    )

    script: str | None = Field(
        default=None, min_length=1,
        description="Path of a PySpark script (in the image, a mounted ConfigMap, or locally).")
    args: list[str] = Field(
        default_factory=list, max_length=256, description="The script's sys.argv[1:].")
    module: str | None = Field(
        default=None, pattern=APPLICATION_FUNCTION.pattern,
        description="'package.module:function', called as function(spark, options).")
    options: dict[str, str] = Field(
        default_factory=dict, description="Keyword options for the module function.")
    config_map: str | None = Field(
        default=None, max_length=253,
        pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$",
        description="A ConfigMap in the job's namespace holding the script under the key "
                    "`script`, labelled stream-autoscaler.io/job-reference=true; the controller "
                    "mounts it read-only in the driver pod.")

    @model_validator(mode="after")
    def _one_way_in(self) -> Application:
        if (self.script is None) == (self.module is None):
            raise ValueError("set exactly one of script or module")
        if self.args and self.script is None:
            raise ValueError("args are a script's; a module function takes options")
        if self.config_map is not None and (self.script is None or "/" in self.script):
            raise ValueError(
                "with configMap, script is the key of the ConfigMap that holds the script "
                "(a file name, no '/')"
            )
        return self

    @property
    def label(self) -> str:
        """How errors and logs name it: the script's path or the module function."""
        return self.script or self.module or "application"


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


NOT_SHARED = (
    "a managed job's checkpoint must be shared by the driver and every executor pod and outlive "
    "them: set checkpoint.volume (a ReadWriteMany claim, mounted at the same path in every pod, "
    "with location under its mountPath) or put it on an object store (s3a://BUCKET/path); a "
    "path on no claim would keep state on each pod's disk"
)


class StreamJobSpec(SpecModel):
    """What to run and under which policy."""

    model_config = ConfigDict(
        json_schema_extra=cel(
            ("!has(self.application) || !(has(self.source) || has(self.pipeline))",
             "set either application or source, pipeline and sink"),
            ("!has(self.application) || !has(self.sink) || has(self.application.module)",
             "a script writes where it says: sink is for a module function's DataFrame"),
            ("has(self.application) || (has(self.source) && has(self.pipeline) && "
             "has(self.sink))",
             "a pipeline job needs source, pipeline and sink"),
            ("has(self.attach) || has(self.checkpoint.volume) || "
             f"self.checkpoint.location.startsWith('{OBJECT_STORE_PREFIX}')", NOT_SHARED),
        )
    )

    policy_ref: PolicyRef = Field(default_factory=PolicyRef)
    application: Application | None = Field(
        default=None,
        description="The user's own PySpark script or function, run unmodified (instead of "
        "source, pipeline and sink).")
    source: Source | None = Field(default=None, description="The pipeline's main source.")
    pipeline: list[Operator] | None = Field(
        default=None, min_length=1, description="Named operators, in order.")
    sink: Sink | None = Field(default=None, description="Where the pipeline writes.")
    trigger: Trigger = Field(default_factory=Trigger)
    checkpoint: Checkpoint
    state_partitions: int = Field(
        default=4, ge=1, le=4096, description="State partitions at first start (count)."
    )
    executors: ExecutorSpec = Field(default_factory=ExecutorSpec)
    spark: SparkSpec = Field(default_factory=SparkSpec)
    attach: AttachSpec | None = Field(default=None, description="Attached mode, if set.")

    @model_validator(mode="after")
    def _one_kind_of_job(self) -> StreamJobSpec:
        parts = {"source": self.source, "pipeline": self.pipeline, "sink": self.sink}
        given = [k for k, v in parts.items() if v is not None]
        app = self.application
        if app is not None and (self.source is not None or self.pipeline is not None):
            raise ValueError(
                f"set either application or source, pipeline and sink, not both "
                f"(also given: {', '.join(given)})")
        if app is not None and self.sink is not None and app.module is None:
            raise ValueError("a script writes where it says: sink is for a module function "
                             "that returns a DataFrame")
        if self.application is None and len(given) < 3:
            missing = [k for k in parts if k not in given]
            raise ValueError(
                f"a pipeline job needs source, pipeline and sink (missing: {', '.join(missing)}); "
                "or run your own PySpark job with application.script / application.module")
        return self

    @model_validator(mode="after")
    def _shared_checkpoint(self, info: ValidationInfo) -> StreamJobSpec:
        """In a cluster a managed job's checkpoint must be one every pod reads and writes."""
        cluster = bool(info.context and info.context.get(CLUSTER_CONTEXT))
        if cluster and self.attach is None and not self.checkpoint.shared:
            raise ValueError(f"checkpoint.location ({self.checkpoint.location}): {NOT_SHARED}")
        return self

    @property
    def is_application(self) -> bool:
        """Whether the job is the user's own PySpark code rather than our pipeline."""
        return self.application is not None

    @model_validator(mode="after")
    def _names(self) -> StreamJobSpec:
        names = [op.name for op in self.pipeline or []]
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
    max_records_per_batch: int | None = Field(
        default=None,
        description="Admission cap of the query a repartition or recovery starts (records per "
        "micro-batch); None = the job's own.",
    )
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
    backlog_observed_at: float | None = Field(
        default=None,
        description="Unix time (s) the backlog and its age were read: what a recovery adds "
        "the arrivals since to, when the driver that reported them is gone.",
    )
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
