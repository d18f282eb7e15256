"""A StreamJob's pipeline: the named operators between its source and its sink.

Part of the StreamJob contract (:mod:`contracts.streamjob` re-exports every name).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from contracts.api import SpecModel
from contracts.sources import Source

Name = Annotated[
    str,
    Field(min_length=1, max_length=63, pattern=r"^[a-z][a-z0-9_-]*$", description="Operator name."),
]

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

