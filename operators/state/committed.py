"""What a checkpoint says the query committed: the last batch and its sources' end offsets.

Usage::

    progress = committed_progress("/data/cp")     # after (or while) the query runs
    progress.last_committed_batch, progress.records()   # {"main": 120000, "right:j": ...}

Reads ``commits/`` (the last committed batch N), ``offsets/N`` (each source's end offset, and
the watermark batch N ran with) and, for a Kafka source, ``sources/0/0`` (where it started).
The exactly-once verifier replays exactly this input (:mod:`operators.verifier`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from operators.errors import VerifierError
from operators.offsets import burst_offset, topic_offsets

if TYPE_CHECKING:
    from operators.state.store import CheckpointStore


@dataclass(frozen=True)
class CommittedProgress:
    """What a checkpoint says the query committed."""

    last_committed_batch: int | None
    offsets: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Burst offsets of the last committed batch, by stream name ("main", "right:<join>")."""
    watermark_ms: int = 0
    """The event-time watermark batch N ran with (ms since the epoch)."""
    kafka_end: dict[str, dict[int, int]] | None = None
    """End offsets of the (single) Kafka source after batch N: ``{topic: {partition: off}}``."""
    kafka_start: dict[str, dict[int, int]] | None = None
    """Where the query's Kafka source started (``sources/0/0``)."""

    def records(self) -> dict[str, int]:
        """Records committed per stream."""
        out = {s: int(o["offset"]) for s, o in self.offsets.items()}
        if self.kafka_end is not None:
            start = self.kafka_start or {}
            out["main"] = sum(
                off - start.get(t, {}).get(p, 0)
                for t, parts in self.kafka_end.items()
                for p, off in parts.items()
            )
        return out


def committed_progress(checkpoint_dir: str) -> CommittedProgress:
    """Reads ``commits/`` and ``offsets/`` of a checkpoint (local or on an object store)."""
    from operators.state.store import StoreError, open_store

    try:
        cp = open_store(checkpoint_dir)
        kafka_start = _initial_kafka_offsets(cp)
        commits = sorted(int(n) for n in cp.listdir("commits") if n.isdigit())
    except (StoreError, OSError) as e:
        raise VerifierError(f"checkpoint {checkpoint_dir} cannot be read: {e}") from None
    if not commits:
        return CommittedProgress(None, kafka_start=kafka_start)
    last = commits[-1]
    offsets_file = cp.describe("offsets", str(last))
    try:
        lines = cp.read_text("offsets", str(last)).splitlines()
    except OSError as e:
        raise VerifierError(
            f"checkpoint {checkpoint_dir}: batch {last} is committed but "
            f"{offsets_file} cannot be read ({e})"
        ) from None
    if len(lines) < 2 or lines[0] != "v1":
        raise VerifierError(f"{offsets_file}: not a Spark offsets log entry")
    meta = json.loads(lines[1])
    offsets = {}
    kafka: list[dict[str, dict[int, int]]] = []
    for line in lines[2:]:
        if not line.strip() or line.strip() == "-":
            continue
        value = json.loads(line)
        burst = burst_offset(value)
        if burst is not None and burst.run_start_us is not None:
            offsets[burst.stream] = value
        elif (k := topic_offsets(value)) is not None:
            kafka.append(k)
    if len(kafka) > 1:
        raise VerifierError(f"{offsets_file}: {len(kafka)} Kafka sources; one can be replayed")
    return CommittedProgress(
        last,
        offsets,
        int(meta.get("batchWatermarkMs", 0)),
        kafka_end=kafka[0] if kafka else None,
        kafka_start=kafka_start,
    )


def _initial_kafka_offsets(cp: CheckpointStore) -> dict[str, dict[int, int]] | None:
    """The Kafka source's initial offsets (``sources/0/0``: a zero byte, ``v1``, the JSON)."""
    try:
        raw = cp.read_bytes("sources", "0", "0").decode("utf-8", errors="replace")
    except OSError:
        return None
    brace = raw.find("{")
    return topic_offsets(raw[brace:]) if brace >= 0 else None
