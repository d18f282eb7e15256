"""The runner's control endpoint (ports, token, routes, phases, actions, status), declared once.

The data plane serves it (``operators/driver/control.py`` over
:class:`operators.driver.runner.JobRunner`; the fakes in ``operators/testing``); the control plane
reads it (``controller/adapters/runner_client``).
Routes (all JSON; a bearer token except ``/healthz``)::

    GET  /healthz                        -> 200 HealthResponse (503 when Failed), no token
    GET  /status                         -> 200 RunnerStatus
    POST /executors   ExecutorsRequest   -> 202 ActionAnswer | 200 (duplicate id) | 400 | 409
    POST /repartition RepartitionRequest -> 202 ActionAnswer | 200 (duplicate id) | 400 | 409
    POST /stop        StopRequest        -> 202 ActionAnswer | 200 (duplicate id) | 409

Actions run in the background: a POST answers at once with the action's id, ``/status`` shows its
progress and result. A body may carry ``actionId``; a repeat of a known id (running, or among the
last :data:`RECENT_ACTIONS`) answers 200 with that action (``duplicate: true``) and starts nothing,
so a controller may retry after a crash without acting twice. One action at a time: a request
meanwhile gets 409 (:class:`ConflictResponse`, with the phase); a bad body 400
(:class:`BadRequest`, naming the field); a missing or wrong token 401.

**Engine actions and runner actions differ by design.** The engine decides
(``controller.core.reasons.Action``) ``scale``, ``repartition`` or ``recover``; the runner knows
:class:`ActionKind` ``executors``, ``repartition`` and ``stop``. The kube host turns a decision
into runner steps (``controller.kube.actions.steps``), each under its own action id:

==============  ========================================================================
engine action   runner steps
==============  ========================================================================
scale           ``executors`` (id = the intent's id)
repartition     ``executors`` (id ``<id>-x``, only when executors change too), then
                ``repartition`` (id = the intent's id)
recover         none: the driver pod is restarted; the runner resumes from its checkpoint
(deletion)      ``stop`` (id ``finalizer-stop``), at a batch boundary
==============  ========================================================================

Wire keys are as the runner has always sent them (camelCase at the top of ``/status``, the
action records' and executors' keys snake_case); the models carry them as aliases. Parsing is
tolerant: unknown keys are ignored (a newer runner may add fields), and a value that is missing
or unknown (a phase this version does not know) reads as ``None``, never as zero.
"""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Iterable
from enum import StrEnum
from typing import Annotated, Any, ClassVar, TypeAlias, TypeGuard

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from contracts.errors import ContractError

CONTROL_PORT = 8081
"""The control endpoint's default port (``runner --control-port``; the driver pod's port)."""
METRICS_PORT = 9108
"""The runner's Prometheus ``/metrics`` default port (``runner --metrics-port``)."""
TOKEN_ENV = "STREAM_AUTOSCALER_TOKEN"
"""The environment variable holding the bearer token (else a token file)."""
MAX_BODY_BYTES = 64 * 1024
"""A larger request body is refused with 413."""
RECENT_ACTIONS = 16
"""Actions remembered by id, so a controller that retries after a crash or a lost answer finds
its action instead of starting it again (a controller has at most one action in flight per job,
so 16 covers many restarts)."""
ACTION_ID_PATTERN = r"^[A-Za-z0-9._-]{1,64}$"
MAX_PARTITIONS = 4096
MAX_RECORDS_PER_BATCH = 1_000_000_000
"""The largest admission cap a request may set (records per micro-batch), as the burst source's
``maxRecordsPerBatch`` allows."""


class Route(StrEnum):
    """The endpoint's paths."""

    HEALTHZ = "/healthz"
    STATUS = "/status"
    EXECUTORS = "/executors"
    REPARTITION = "/repartition"
    STOP = "/stop"


class Phase(StrEnum):
    """The runner's lifecycle phase (``/status`` ``phase``, the ``phase`` metric's label)."""

    STARTING = "Starting"
    RUNNING = "Running"
    SCALING = "Scaling"
    REPARTITIONING = "Repartitioning"
    STOPPING = "Stopping"
    STOPPED = "Stopped"
    FAILED = "Failed"


class ActionKind(StrEnum):
    """What a runner can be asked to do (not the engine's actions: see the module docstring)."""

    EXECUTORS = "executors"
    REPARTITION = "repartition"
    STOP = "stop"


class Step(StrEnum):
    """The steps a restart, a scale or a start is made of (``ActionRecord.steps``,
    ``RunnerStatus.startSteps``, the ``action_step_seconds`` gauge): each is the seconds that
    step alone took, so their sum is the time the job was not committing batches."""

    STOP_WAIT = "stop_wait"
    """A gap between triggers looked for, then the query stopped."""
    DRAIN = "drain"
    """The batch the stop caught in flight, run to its commit by a one-batch query (a rewrite
    of the state needs a checkpoint that ends on a committed batch)."""
    SNAPSHOT = "snapshot"
    """The checkpoint's file list and small metadata saved for a rollback."""
    COUNT_ROWS = "count_rows"
    """State rows counted before and after the rewrite (both Spark jobs)."""
    REWRITE = "rewrite"
    """Spark's offline repartition: state read, shuffled and written at the new count."""
    VERIFY = "verify"
    """The new batch's partition count and commit checked, the file sink's log entry added."""
    PROCESS = "process"
    """A start's runner process until it starts the job: the interpreter, its imports, the
    job's spec read (from the process's own start time, where the OS gives it)."""
    CHECKPOINT = "checkpoint"
    """A start's checkpoint inspected, locked, and an unfinished repartition rolled back."""
    SESSION = "session"
    """The Spark session (driver JVM, application registered) at a start."""
    EXECUTORS = "executors"
    """Executors requested, killed or waited for until the target count is live."""
    QUERY_START = "query_start"
    """``start()`` of the query until Spark runs it."""
    FIRST_COMMIT = "first_commit"
    """The query running until its first batch commits: state loaded on the executors, the
    first batch planned and run."""


class ActionState(StrEnum):
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


ROUTE_OF: dict[ActionKind, Route] = {
    ActionKind.EXECUTORS: Route.EXECUTORS,
    ActionKind.REPARTITION: Route.REPARTITION,
    ActionKind.STOP: Route.STOP,
}
KIND_OF: dict[str, ActionKind] = {route.value: kind for kind, route in ROUTE_OF.items()}
"""POST path -> the action it starts."""
PHASE_DURING: dict[ActionKind, Phase] = {
    ActionKind.EXECUTORS: Phase.SCALING,
    ActionKind.REPARTITION: Phase.REPARTITIONING,
    ActionKind.STOP: Phase.STOPPING,
}
"""The runner's phase while an action of each kind runs."""


def _known_phase(value: Any) -> Phase | None:
    """A phase this version knows, else None (unknown, not a default)."""
    try:
        return Phase(value)
    except ValueError:
        return None


KnownPhase = Annotated[Phase | None, BeforeValidator(_known_phase)]
"""A phase as read from a runner: one this version does not know is None."""


class WireModel(BaseModel):
    """Base of the endpoint's models: aliases on the wire, unknown keys ignored."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    def to_wire(self) -> dict[str, Any]:
        """The JSON object as sent: every key, ``None`` as null."""
        return self.model_dump(by_alias=True, mode="json")


# --- requests -------------------------------------------------------------------------------


class RequestError(ContractError):
    """A request body the endpoint refuses (400); ``field`` names the culprit."""

    def __init__(self, field: str | None, message: str) -> None:
        super().__init__(message)
        self.field = field

    def response(self) -> BadRequest:
        return BadRequest(error=str(self), field=self.field)


class _Request(WireModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True, frozen=True)

    action_id: str | None = Field(
        default=None, alias="actionId", strict=True, pattern=ACTION_ID_PATTERN,
        description="Makes the request idempotent: a known id starts nothing.")

    def body(self) -> dict[str, Any]:
        """The JSON body a client sends (``actionId`` only when given)."""
        return self.model_dump(by_alias=True, mode="json", exclude_none=True)


class ExecutorsRequest(_Request):
    """``POST /executors``: the absolute executor count to reach."""

    kind: ClassVar[ActionKind] = ActionKind.EXECUTORS
    target: int = Field(strict=True, ge=0)

    @field_validator("target")
    @classmethod
    def _ceiling(cls, v: int, info: ValidationInfo) -> int:
        ceiling = (info.context or {}).get("max_executors")
        if ceiling is not None and v > ceiling:
            raise ValueError("above the maximum")
        return v

    def within(self, max_executors: int) -> ExecutorsRequest:
        """Self if ``target`` is within the runner's ceiling; else RequestError."""
        if self.target > max_executors:
            raise RequestError("target", _message("target", "value_error", max_executors))
        return self


class RepartitionRequest(_Request):
    """``POST /repartition``: the state partitions to repartition to (equal = a restart), and
    optionally the admission cap of the query it starts again."""

    kind: ClassVar[ActionKind] = ActionKind.REPARTITION
    partitions: int = Field(strict=True, ge=1, le=MAX_PARTITIONS)
    max_records_per_batch: int | None = Field(
        default=None, alias="maxRecordsPerBatch", strict=True, ge=1, le=MAX_RECORDS_PER_BATCH,
        description="Records per micro-batch for the resumed query (the source's rate limit, "
        "the lower of this and the job's own); absent = the job's own.")


class StopRequest(_Request):
    """``POST /stop``: stop at a batch boundary."""

    kind: ClassVar[ActionKind] = ActionKind.STOP


ActionRequest: TypeAlias = ExecutorsRequest | RepartitionRequest | StopRequest
REQUEST_OF: dict[ActionKind, type[ActionRequest]] = {
    ActionKind.EXECUTORS: ExecutorsRequest,
    ActionKind.REPARTITION: RepartitionRequest,
    ActionKind.STOP: StopRequest,
}
PARAM_OF: dict[ActionKind, str | None] = {
    ActionKind.EXECUTORS: "target", ActionKind.REPARTITION: "partitions", ActionKind.STOP: None}
"""The one parameter each action takes."""


def _message(field: str, error_type: str, max_executors: int | None = None) -> str:
    if error_type == "missing":
        return f"{field}: required"
    if field == "actionId":
        return "actionId: a string" if error_type == "string_type" else (
            "actionId: 1-64 characters of [A-Za-z0-9._-]")
    if field == "maxRecordsPerBatch":
        return f"maxRecordsPerBatch: an integer in 1..{MAX_RECORDS_PER_BATCH}"
    if field == "target":
        if max_executors is None:
            return "target: an integer >= 0"
        return f"target: an integer in 0..{max_executors} (max executors)"
    return f"partitions: an integer in 1..{MAX_PARTITIONS}"


def parse_request(kind: ActionKind | str, body: Any,
                  max_executors: int | None = None) -> ActionRequest:
    """The request model of a POST body, or RequestError naming the field (the 400 answer).

    ``max_executors``: the runner's ceiling for ``target``; None checks only ``>= 0`` (the runner
    then checks the ceiling with :meth:`ExecutorsRequest.within`)."""
    if not isinstance(body, dict):
        raise RequestError("body", "body: a JSON object is required")
    model = REQUEST_OF[ActionKind(kind)]
    try:
        return model.model_validate(body, context={"max_executors": max_executors})
    except ValidationError as e:
        # the action's parameter first (a missing ``target`` before a bad ``actionId``)
        first = sorted(e.errors(), key=lambda err: err["loc"][:1] == ("actionId",))[0]
        field = str(first["loc"][0]) if first["loc"] else "body"
        raise RequestError(field, _message(field, first["type"], max_executors)) from None


# --- actions and answers --------------------------------------------------------------------


class ActionRecord(WireModel):
    """One action: what was asked, how it went, how long each step took (``/status``'s
    ``action``, ``lastAction``, ``recentActions`` and the 409's ``action``). The runner keeps
    these and updates them as the action runs."""

    kind: ActionKind | str = Field(union_mode="left_to_right")
    """A kind this version does not know stays a string (a newer runner's)."""
    params: dict[str, Any] = Field(default_factory=dict)
    id: str = Field(default_factory=lambda: uuid.uuid4().hex[:12])
    state: ActionState | str = Field(default=ActionState.RUNNING, union_mode="left_to_right")
    started_at: float = Field(default_factory=time.time)
    finished_at: float | None = None
    timings: dict[str, float] = Field(default_factory=dict)
    """Seconds per milestone, from the action's start (``total``, ``executors_live``,
    ``first_task``, ``stop``, ``repartition``, ``resumed``, ``first_commit``)."""
    steps: dict[str, float] = Field(default_factory=dict)
    """Seconds each :class:`Step` alone took, in the order run (a step run twice adds up)."""
    result: dict[str, Any] = Field(default_factory=dict)
    error: str | None = None
    duplicates: int = 0
    """Repeated requests with this id, answered without starting anything."""


def find_action(current: ActionRecord | None, recent: Iterable[ActionRecord],
                action_id: str | None) -> ActionRecord | None:
    """The running (``current``) or a recent action with this id; None for no id."""
    if not action_id:
        return None
    return next((a for a in (current, *recent) if a is not None and a.id == action_id), None)


def accepts(phase: Phase | None, kind: ActionKind, busy: bool) -> bool:
    """Whether a runner in ``phase`` starts an action of ``kind`` (else 409): one action at a
    time, only while Running, except a stop of a Failed runner."""
    return not busy and (phase == Phase.RUNNING
                         or (kind == ActionKind.STOP and phase == Phase.FAILED))


class ActionAnswer(WireModel):
    """The 202 (started) and 200 (a known ``actionId``: ``duplicate`` true) answer."""

    action: str
    """The action's id."""
    kind: ActionKind | str = Field(union_mode="left_to_right")
    params: dict[str, Any] = Field(default_factory=dict)
    state: ActionState | str = Field(union_mode="left_to_right")
    duplicate: bool | None = None
    phase: KnownPhase = None

    def to_wire(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True, mode="json", exclude_none=True)

    @staticmethod
    def of(record: ActionRecord, phase: Phase, duplicate: bool = False) -> ActionAnswer:
        return ActionAnswer(action=record.id, kind=record.kind, params=dict(record.params),
                            state=record.state, duplicate=True if duplicate else None,
                            phase=phase)


class ErrorResponse(WireModel):
    """401, 404, 413 (and the base of 400 and 409)."""

    error: str


class BadRequest(ErrorResponse):
    """400: the field at fault (``body`` when the body itself is)."""

    field: str | None = None


class ConflictResponse(ErrorResponse):
    """409: the runner is busy with an action, or in a phase that allows no action."""

    phase: KnownPhase = None
    action: ActionRecord | None = None

    @staticmethod
    def of(phase: Phase, action: ActionRecord | None) -> ConflictResponse:
        busy = f"; action {action.id} ({action.kind}) in progress" if action else ""
        return ConflictResponse(error=f"runner is {phase}{busy}", phase=phase, action=action)


class HealthResponse(WireModel):
    """``GET /healthz``: 200 unless Failed (503)."""

    ok: bool
    phase: KnownPhase = None


# --- /status --------------------------------------------------------------------------------


class ExecutorEntry(WireModel):
    """One live executor as the driver's REST API reports it."""

    id: str
    host_port: str | None = None
    cores: int | None = None
    active_tasks: int | None = None
    total_tasks: int | None = None
    memory_used: int | None = None
    added_time: str | None = None


class Executors(WireModel):
    live: int | None = None
    target: int | None = None
    cores: int | None = None
    entries: list[ExecutorEntry] = Field(default_factory=list, alias="list")


class Rates(WireModel):
    """Records/s of the last batch (arrival: growth of the source's latest offset, read after
    each batch and during a long one; 0 once Spark reports the query idle, i.e. a trigger found
    no new data)."""

    arrival_rows_per_second: float | None = None
    input_rows_per_second: float | None = None
    processed_rows_per_second: float | None = None


class BacklogStatus(WireModel):
    records: float | None = None
    age_seconds: float | None = Field(default=None, alias="ageSeconds")


class StageReport(WireModel):
    """One stage of the last polled batch (the driver UI's REST API)."""

    stage_id: int | None = None
    kind: str | None = None
    tasks: int | None = None
    rows: float | None = None
    busy_seconds: float | None = None
    wall_seconds: float | None = None
    max_task_seconds: float | None = None
    median_task_seconds: float | None = None
    failed_tasks: int | None = None
    tasks_by_executor: dict[str, int] = Field(default_factory=dict)
    name: str | None = None


class LostExecutorEntry(WireModel):
    """One executor lost with its node, removed by the runner so that Spark replaces it
    (``operators.query.node_loss``)."""

    executor_id: str = Field(alias="executorId")
    pod: str
    node: str
    not_ready_since: float = Field(alias="notReadySince")
    """Unix time its pod turned not Ready."""
    removed_at: float = Field(alias="removedAt")
    """Unix time the runner killed it in Spark and force-deleted its pod."""


class StartFirstBatch(WireModel):
    """The first batch a runner's start committed: what its ``first_commit`` step ran. A
    recovery's first commit waits for this batch, and when it is the batch the failed driver
    left in flight it replays as that driver planned it (its offsets were written before the
    failure), whatever the new layout or cap: so its rows, not the new size, set its time."""

    batch_id: int = Field(alias="batchId")
    rows: int | None = None
    """Records it read (the progress event's ``numInputRows``)."""
    seconds: float | None = None
    """Its own run, trigger to commit (``durationMs.triggerExecution``)."""
    replayed: bool = False
    """It is the batch the checkpoint held uncommitted when the runner started."""

    @classmethod
    def of_progress(cls, progress: dict[str, Any], in_flight: int | None) -> StartFirstBatch:
        """From Spark's progress event of the batch (``StreamingQueryProgress.json``) and the
        batch the checkpoint held uncommitted at the start (None: none)
        (tests/unit/contracts/test_runner_api.py)."""
        batch = int(progress["batchId"])
        rows = progress.get("numInputRows")
        ms = (progress.get("durationMs") or {}).get("triggerExecution")
        return cls(batch_id=batch, rows=int(rows) if _finite(rows) else None,
                   seconds=round(ms / 1000, 3) if _finite(ms) else None,
                   replayed=in_flight is not None and batch == in_flight)


def _finite(v: Any) -> TypeGuard[int | float]:
    """A number JSON can carry (no bool, NaN or infinity)."""
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


class RunnerStatus(WireModel):
    """``GET /status``: what the runner is doing and has done."""

    job: str | None = None
    phase: KnownPhase = None
    query_id: str | None = Field(default=None, alias="queryId")
    executors: Executors = Field(default_factory=Executors)
    partitions: int | None = None
    last_committed_batch: int | None = Field(default=None, alias="lastCommittedBatch")
    resumed_from_batch: int | None = Field(default=None, alias="resumedFromBatch")
    rates: Rates = Field(default_factory=Rates)
    backlog: BacklogStatus = Field(default_factory=BacklogStatus)
    batch_duration_seconds: float | None = Field(default=None, alias="batchDurationSeconds")
    stages: list[StageReport] | None = None
    stateful_tasks_by_executor: dict[str, int] | None = Field(
        default=None, alias="statefulTasksByExecutor")
    last_error: str | None = Field(default=None, alias="lastError")
    max_records_per_batch: int | None = Field(default=None, alias="maxRecordsPerBatch")
    """The admission cap the controller set on the running query (records per micro-batch: a
    repartition's or a recovery's); None = the job's own."""
    start_steps: dict[str, float] = Field(default_factory=dict, alias="startSteps")
    """Seconds each :class:`Step` of this runner's start took (a recovery's kill -> first
    batch, less the pod's scheduling and image start)."""
    start_first_batch: StartFirstBatch | None = Field(default=None, alias="startFirstBatch")
    """The first batch this runner's start committed (the ``first_commit`` step's); None
    before it."""
    lost_executors: list[LostExecutorEntry] = Field(default_factory=list, alias="lostExecutors")
    """Executors lost with their node, oldest first, at most :data:`RECENT_ACTIONS`."""
    warm_executors: list[str] = Field(default_factory=list, alias="warmExecutors")
    """Live executors that have run the job or its warm-up: a restart's first batch finds
    their Python workers, state store and code loaded (:mod:`operators.query.warmup`)."""
    last_warmup: dict[str, Any] | None = Field(default=None, alias="lastWarmup")
    """The last warm-up: ``warmed`` (executor ids), ``rounds``, ``seconds``, and ``cold`` or
    ``error`` when it left some executor cold; None before any."""
    action: ActionRecord | None = None
    """The action in progress."""
    last_action: ActionRecord | None = Field(default=None, alias="lastAction")
    recent_actions: list[ActionRecord] = Field(default_factory=list, alias="recentActions")
    """Oldest first, at most :data:`RECENT_ACTIONS`."""

    def find_action(self, action_id: str) -> ActionRecord | None:
        """The running or a recent action with this id."""
        return find_action(self.action, self.recent_actions, action_id)
