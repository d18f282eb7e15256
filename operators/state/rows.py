"""State row counts of a checkpoint, read with Spark's ``statestore`` source.

``format("state-metadata")`` lists the operators (its ``numPartitions`` goes stale after a
repartition, so the count comes from the offsets log instead); ``format("statestore")`` reads the
rows of the last committed batch. A stream-stream join is read per side (``joinSide``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def state_rows(spark: SparkSession, location: str) -> dict[int, int]:
    """Rows in state per operator id, as of the last committed batch."""
    meta = spark.read.format("state-metadata").load(location).collect()
    rows: dict[int, int] = {}
    seen_joins: set[int] = set()
    for m in meta:
        op = int(m["operatorId"])
        name = str(m["operatorName"] or "")
        reader = spark.read.format("statestore").option("operatorId", op)
        if "join" in name.lower():
            if op in seen_joins:
                continue
            seen_joins.add(op)
            total = sum(
                reader.option("joinSide", side).load(location).count() for side in ("left", "right")
            )
        else:
            total = reader.option("storeName", m["stateStoreName"]).load(location).count()
        rows[op] = rows.get(op, 0) + int(total)
    return rows
