"""The job model: the parameters of a simulated Spark micro-batch job, and its capacity math.

A micro-batch runs its stages one after another on the same executors. Each stage has a cost per
record (task-seconds on one core) and a parallelism cap (its partitions: the source partitions for
the read stage, the state partitions for the stateful stage). A stage with ``p`` partitions on
``s`` usable slots runs ``ceil(p / s)`` waves of tasks of ``records * cost / p`` seconds each.
Every batch also pays a fixed driver overhead that executors do not shrink.

Defaults describe the reference pipeline of docs/spark-facts.md scaled so that one 1-core executor
processes 10,000 records/s at full utilization (4e-5 + 6e-5 task-seconds per record). Every field
is documented in ``docs/simulator.md`` (generated from the descriptions here).
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import ConfigDict, Field, ValidationError, model_validator

from contracts.api import Model
from contracts.manifests import ManifestError, read_yaml
from controller.errors import SimulatorInputError

StageKindModel = Literal["source", "stateless", "stateful"]


class ModelError(SimulatorInputError):
    """A job model file that cannot be used, with the field and why."""


class StageModel(Model):
    """One stage of the micro-batch, in execution order."""

    model_config = ConfigDict(allow_inf_nan=False)

    name: str = Field(min_length=1, description="Stage (operator) name, as the metrics show it.")
    kind: StageKindModel = Field(description="source (read stage), stateless, or stateful.")
    cost_per_record: float = Field(
        ge=1e-9, le=10.0,
        description="Task time per record on one core (s/record): the stage's true cost."
    )
    partitions: int | None = Field(
        default=None,
        ge=1,
        description="Tasks per batch (count). None: the source partitions for source and "
        "stateless stages, the current state partitions for the stateful stage.",
    )


def _default_stages() -> tuple[StageModel, ...]:
    return (
        StageModel(name="source", kind="source", cost_per_record=4.0e-5),
        StageModel(name="aggregate", kind="stateful", cost_per_record=6.0e-5),
    )


class JobModel(Model):
    """Parameters of the simulated job. Units in each description; defaults in docs/simulator.md.

    Every number is finite and bounded: ``.inf`` or a tiny trigger made a run divide by zero,
    overflow or take minutes
    (tests/unit/simulator/test_model.py::test_a_model_out_of_bounds_is_refused_naming_the_field).
    """

    model_config = ConfigDict(allow_inf_nan=False)

    stages: tuple[StageModel, ...] = Field(
        default_factory=_default_stages,
        description="Stages in order: a read stage (40% of the cost) then a keyed aggregation "
        "(60%), 1e-4 task-s/record in all, so one core does 10,000 records/s.",
    )
    source_partitions: int = Field(
        default=8, ge=1, le=10_000,
        description="Source partitions (count): the read stage's task cap."
    )
    state_partitions: int = Field(
        default=2,
        ge=1,
        le=10_000,
        description="State partitions at start (count). Small on purpose: a big burst becomes "
        "partition-bound and shows the repartition move.",
    )
    initial_executors: int = Field(
        default=2,
        ge=0,
        le=1_000,
        description="Executors at start (count) unless the policy sets executors.initial. Two "
        "sustain load 1 at a 1 s trigger with 0.3 s overhead.",
    )
    cores_per_executor: int = Field(default=1, ge=1, le=64,
                                    description="Task slots per executor.")
    trigger_seconds: float = Field(
        default=1.0,
        ge=0.1,
        le=3600,
        description="Trigger interval (s). A batch starts at the next multiple of it after the "
        "previous batch started, or at once if that batch overran.",
    )
    overhead_seconds: float = Field(
        default=0.3,
        ge=0,
        le=600,
        description="Fixed driver time per batch (s): planning, offsets, WAL and state commits.",
    )
    max_records_per_batch: int | None = Field(
        default=None, ge=1, le=10**12,
        description="Cap on records per batch (count); None takes all."
    )
    executor_start_seconds: float = Field(
        default=10.0,
        ge=0,
        le=3600,
        description="Request to first task on a new executor (s): registration 5–8 s plus the "
        "first task 3–4 s later (docs/spark-facts.md).",
    )
    restart_seconds: float = Field(
        default=9.0,
        ge=0,
        le=3600,
        description="Stop at a batch boundary and resume the query (s): session start ~6 s, "
        "first result ~9 s (docs/spark-facts.md).",
    )
    restart_skips_batch: bool = Field(
        default=True,
        description="A restart gives up the batch in flight when batches run back to back (the "
        "last one outlasted the trigger) and the resumed query reads its records again on the new "
        "layout, as the runner does where no reader saw that batch (its files sink, Spark's file "
        "sink, noop). false: the restart waits for the batch to commit (Kafka, memory and "
        "foreachBatch sinks).",
    )
    repartition_bytes_per_second: float = Field(
        default=8.8e6,
        ge=1e3,
        le=1e12,
        description="Offline state repartition speed (bytes/s): 113 MB in 12.9 s "
        "(docs/spark-facts.md).",
    )
    keys: int = Field(
        default=1_000_000, ge=1, le=10**10,
        description="Distinct keys the source draws from (count)."
    )
    initial_keys: int = Field(
        default=200_000, ge=0, le=10**10, description="Keys already in state at start (count)."
    )
    state_bytes_per_key: float = Field(
        default=38.0,
        ge=1,
        le=1e7,
        description="State size per key (bytes): 113 MB for 3M keys in RocksDB "
        "(docs/spark-facts.md).",
    )
    failure_restart_seconds: float = Field(
        default=10.0,
        ge=0,
        le=3600,
        description="For baselines only: after a driver failure the platform (Kubernetes restart "
        "policy) starts a new driver this long after the failure (s); the restart itself then "
        "takes restart_seconds. Our engine restarts the driver only when it decides RECOVER.",
    )
    noise: float = Field(
        default=0.0,
        ge=0,
        le=0.5,
        description="Measurement noise: relative standard deviation applied to the rates, rows "
        "and busy times the snapshot reports (fraction). The job itself is deterministic.",
    )
    seed: int = Field(default=0, description="Seed of the measurement noise.")

    @model_validator(mode="after")
    def _shape(self) -> JobModel:
        if not self.stages or self.stages[0].kind != "source":
            raise ValueError("the first stage must be the read stage (kind: source)")
        if sum(s.kind == "source" for s in self.stages) != 1:
            raise ValueError("exactly one stage may have kind: source")
        if sum(s.kind == "stateful" for s in self.stages) > 1:
            raise ValueError("at most one stateful stage is modelled")
        if len({s.name for s in self.stages}) != len(self.stages):
            raise ValueError("stage names must be unique")
        if self.initial_keys > self.keys:
            raise ValueError(f"initialKeys ({self.initial_keys}) must be <= keys ({self.keys})")
        return self

    # --- capacity math -----------------------------------------------------------------------

    @property
    def load_unit_rate(self) -> float:
        """Records/s one executor processes at full utilization: what ``load`` 1 means."""
        return self.cores_per_executor / sum(s.cost_per_record for s in self.stages)

    def stage_partitions(self, stage: StageModel, state_partitions: int) -> int:
        """The task count of ``stage`` given the current state partitions."""
        if stage.partitions is not None:
            return stage.partitions
        return state_partitions if stage.kind == "stateful" else self.source_partitions

    def seconds_per_record(self, slots: int, state_partitions: int, state_slots: int) -> float:
        """Stage wall time per record of one batch (s), with task waves, without overhead."""
        total = 0.0
        for s in self.stages:
            p = self.stage_partitions(s, state_partitions)
            usable = min(state_slots if s.kind == "stateful" else slots, p)
            if usable <= 0:
                return math.inf
            total += math.ceil(p / usable) * s.cost_per_record / p
        return total

    def sustainable_rate(self, executors: int, state_partitions: int) -> float:
        """Records/s the job keeps up with at its trigger, state spread over all executors."""
        slots = executors * self.cores_per_executor
        per = self.seconds_per_record(slots, state_partitions, slots)
        budget = self.trigger_seconds - self.overhead_seconds
        if budget <= 0 or not math.isfinite(per):
            return 0.0
        return budget / self.trigger_seconds / per

    def fluid_rate(self, executors: int, max_partitions: int) -> float:
        """Records/s of ``executors`` at 100% busy with ideal state partitions (no waves, no
        overhead): the oracle's service rate, an upper bound on what they can do."""
        slots = executors * self.cores_per_executor
        if slots <= 0:
            return 0.0
        total = 0.0
        for s in self.stages:
            if s.kind == "stateful":
                cap = s.partitions or max_partitions
            else:
                cap = s.partitions or self.source_partitions
            total += s.cost_per_record / min(slots, cap)
        return 1.0 / total

    def state_keys(self, processed: float) -> float:
        """Distinct keys in state after ``processed`` records drawn uniformly from ``keys``."""
        seen = -self.keys * math.log1p(-min(self.initial_keys / self.keys, 1 - 1e-12))
        return self.keys * -math.expm1(-(seen + processed) / self.keys)

    def state_bytes(self, processed: float) -> float:
        """State size (bytes) after ``processed`` records."""
        return self.state_keys(processed) * self.state_bytes_per_key

    def repartition_seconds(self, processed: float, changes_partitions: bool) -> float:
        """Downtime of a restart (s): fixed restart plus, if the count changes, state / speed."""
        move = self.state_bytes(processed) / self.repartition_bytes_per_second
        return self.restart_seconds + (move if changes_partitions else 0.0)


def load_model(path: str | None) -> JobModel:
    """The job model from a YAML file (snake_case or camelCase keys), or the defaults."""
    if path is None:
        return JobModel()
    try:
        data = read_yaml(path)  # the manifests' reader: size, alias, depth and key limits
    except ManifestError as e:
        raise ModelError("; ".join(e.problems)) from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ModelError(f"{path}: expected a mapping of model parameters")
    try:
        return JobModel.model_validate(data)
    except ValidationError as e:
        lines = []
        for err in e.errors():
            loc = ".".join(str(p) for p in err["loc"]) or "(model)"
            bad = f" ({err['input']!r})" if err["type"] != "missing" and loc != "(model)" else ""
            lines.append(f"{path}: {loc}{bad}: {err['msg']}")
        raise ModelError("\n".join(lines)) from None


def parameters_table() -> str:
    """The markdown table of every model parameter, its default and meaning (docs/simulator.md
    embeds it; a test fails when it is stale)."""
    rows = ["| parameter (YAML key) | default | meaning |", "|---|---|---|"]
    defaults = JobModel()
    for name, f in JobModel.model_fields.items():
        key = f.alias or name
        value = getattr(defaults, name)
        if name == "stages":
            shown = ", ".join(f"{s.name} ({s.kind}, {s.cost_per_record:g} s/record)" for s in value)
        else:
            shown = "none" if value is None else f"{value:g}" if isinstance(value, float) else value
        rows.append(f"| `{key}` | {shown} | {(f.description or '').replace('|', '/')} |")
    rows.append("")
    rows.append(
        "Each stage: "
        + "; ".join(
            f"`{f.alias or n}`: {f.description}" for n, f in StageModel.model_fields.items()
        )
    )
    return "\n".join(rows)
