"""A job's backlog after each batch: what its sources say is waiting, summed.

Usage (the runner, on every progress event)::

    probe = adapter_for(spec.source).backlog_probe(spec.source)   # once
    backlog = backlog_from_progress(progress, probe, now=time.time())

Each of the progress's sources is asked of the main source's probe
(:class:`operators.sources.base.BacklogProbe`: a burst clock, a Kafka lag probe); offsets the
probe does not know that still count records with one number give records and no age. No
source with known offsets: None (unknown, never 0). Without a probe (a user's own job), Kafka
offsets still give records and per-partition lags, with no age. Standard library only.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from operators.offsets import record_count, topic_offsets
from operators.sources.base import BacklogProbe, PartitionLag, SourceBacklog


def backlog_from_progress(
    progress: Mapping[str, Any], probe: BacklogProbe | None, now: float | None = None
) -> SourceBacklog | None:
    """Records waiting, the oldest one's age, records arrived and (Kafka) partitions and
    per-partition lags, from the sources' end and latest offsets of one progress event."""
    now = time.time() if now is None else now
    records, age, arrived = 0.0, None, None
    partitions: int | None = None
    lags: list[PartitionLag] = []
    known = False
    for s in progress.get("sources") or []:
        end, latest = s.get("endOffset"), s.get("latestOffset")
        b = probe.after_batch(end, latest, now) if probe is not None else None
        if b is None:
            b = _counted(end, latest)
        if b is None:
            continue
        known = True
        records += b.records
        age = b.age_seconds if age is None else max(age, b.age_seconds or 0.0)
        if b.arrived_total is not None:
            arrived = (arrived or 0.0) + b.arrived_total
        if b.source_partitions is not None:
            partitions = b.source_partitions
        lags += b.partition_lags
    if not known:
        return None
    return SourceBacklog(records, age, arrived, partitions, tuple(lags))


def _counted(end: object, latest: object) -> SourceBacklog | None:
    """Records between two offsets that count records with one number, or Kafka's offsets
    (``{"topic": {"0": n}}``, per partition: a user's own Kafka job, whose source we did not
    build); no age."""
    done, last = record_count(end), record_count(latest)
    if done is not None and last is not None:
        return SourceBacklog(max(0.0, last - done))
    ends, latests = topic_offsets(end), topic_offsets(latest)
    if ends is None or latests is None:
        return None
    lags: list[PartitionLag] = []
    for topic, parts in latests.items():
        for part, last_offset in parts.items():
            # a partition the batch did not read yet is read from its start (Spark: earliest)
            behind = max(0, last_offset - ends.get(topic, {}).get(part, 0))
            lags.append((topic, part, float(behind), None))
    return SourceBacklog(sum(lag[2] for lag in lags), None, None,
                         sum(len(p) for p in latests.values()), tuple(lags))
