"""A StreamJob's sources: where its records come from (burst, files, Kafka).

Part of the StreamJob contract (:mod:`contracts.streamjob` re-exports every name).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from contracts.api import SpecModel

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

