"""Source offsets as Spark writes them, parsed once for every reader of them.

Spark writes a source's offset as JSON: in each progress event (``sources[i].startOffset``,
``endOffset``, ``latestOffset``: JSON text) and in the checkpoint's offsets log (one JSON line a
source). The shapes this project reads:

* burst: ``{"offset": n, "runStartUs": t0, "stream": "main"}`` (:func:`burst_offset`);
* Kafka: ``{"topic": {"0": 1234, "1": 99}}`` (:func:`topic_offsets`);
* anything counting records with one number, bare or as ``{"offset": n}`` (:func:`record_count`).

Every function takes the JSON text or the value already parsed, and answers None for an offset
of another shape (never raises): a progress event may carry any source's offsets.
Standard library only.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

TopicOffsets = dict[str, dict[int, int]]
"""``{topic: {partition: offset}}``."""


def offset_value(raw: object) -> Any:
    """The JSON value of an offset (JSON text, or the value already parsed); None when ``raw``
    is None or not JSON."""
    if isinstance(raw, (str, bytes)):
        try:
            return json.loads(raw)
        except ValueError:
            return None
    return raw


@dataclass(frozen=True)
class BurstOffset:
    """A burst source's offset: ``offset`` records read of a run started at ``run_start_us``."""

    offset: int
    run_start_us: int | None
    stream: str = "main"

    @property
    def run_start(self) -> float | None:
        """The run start in Unix seconds."""
        return None if self.run_start_us is None else self.run_start_us / 1e6


def burst_offset(raw: object) -> BurstOffset | None:
    """A burst offset (``runStartUs`` may be missing: then ``run_start_us`` is None)."""
    value = offset_value(raw)
    if not isinstance(value, Mapping) or not _is_number(value.get("offset")):
        return None
    run = value.get("runStartUs")
    if run is not None and not _is_number(run):
        return None
    return BurstOffset(
        int(value["offset"]),
        None if run is None else int(run),
        str(value.get("stream", "main")),
    )


def record_count(raw: object) -> float | None:
    """Records read so far, for an offset that is one number (bare or ``{"offset": n}``)."""
    value = offset_value(raw)
    if _is_number(value):
        return float(value)
    if isinstance(value, Mapping) and _is_number(value.get("offset")):
        return float(value["offset"])
    return None


def topic_offsets(raw: object) -> TopicOffsets | None:
    """A Kafka offset (``{"topic": {"0": 12}}``), or None when ``raw`` is not one (a burst
    offset, a file source's log index)."""
    value = offset_value(raw)
    if not isinstance(value, Mapping) or not value:
        return None
    out: TopicOffsets = {}
    for topic, parts in value.items():
        if not isinstance(parts, Mapping):
            return None
        try:
            out[str(topic)] = {int(p): int(o) for p, o in parts.items()}
        except (TypeError, ValueError):
            return None
    return out


def topic_offsets_json(offsets: TopicOffsets) -> str:
    """Kafka offsets as the connector's ``startingOffsets``/``endingOffsets`` JSON."""
    return json.dumps({t: {str(p): int(o) for p, o in ps.items()} for t, ps in offsets.items()})


def planned_rows(starts: Sequence[object], ends: Sequence[object]) -> float | None:
    """Records between two offset lines of the log, summed over sources; None when any
    source's offsets do not count records (a file source's log index)."""
    if len(starts) != len(ends) or not ends:
        return None
    total = 0.0
    for start, end in zip(starts, ends, strict=True):
        if isinstance(offset_value(start), Mapping):  # a bare number need not count records
            a, b = record_count(start), record_count(end)
            if a is not None and b is not None:
                total += max(0.0, b - a)
                continue
        before, after = topic_offsets(start), topic_offsets(end)
        if before is None or after is None:
            return None
        for topic, parts in after.items():
            for part, offset in parts.items():
                first = before.get(topic, {}).get(part)
                if first is None:  # a partition new in this batch: where it starts is unknown
                    return None
                total += max(0, offset - first)
    return total


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
