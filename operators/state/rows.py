"""State row counts of a checkpoint: read with Spark's ``statestore`` source, or taken from the
RocksDB store's own count in its checkpoint files.

``format("state-metadata")`` lists the operators (its ``numPartitions`` goes stale after a
repartition, so the count comes from the offsets log instead); ``format("statestore")`` reads the
rows of the last committed batch (or of ``batch``). A stream-stream join is read per side
(``joinSide``).

:func:`committed_keys` reads no row: each partition of a RocksDB store commits version
``batch + 1`` as ``state/<operator>/<partition>/<version>.zip``, whose ``metadata`` entry holds
the store's key count (``numKeys``, kept exactly while Spark's
``spark.sql.streaming.stateStore.rocksdb.trackTotalNumberOfRows`` is on, its default). It is a
few small reads where the scan is a Spark job loading every partition's store (on an object
store, downloading its files): the count before a repartition, of state the running query has
just committed. tests/integration/spark_pipelines/test_state_counts.py holds it to the scan.
"""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from operators.state.store import CheckpointStore

MAX_STATE_ZIP_BYTES = 64 << 20
"""A version's zip holds RocksDB's small files (manifest, options, an empty log) and the
metadata entry, never the SST files (those sit beside it, in ``SSTs/``): kilobytes. A larger one
is not read; the scan counts instead."""


def committed_keys(store: CheckpointStore, files: Iterable[str], batch: int,
                   partitions: int) -> dict[int, int] | None:
    """Keys in state per operator id as of ``batch`` (its state version ``batch + 1``), from
    each partition's RocksDB checkpoint metadata; ``files`` lists the checkpoint's files
    (relative paths, as :meth:`CheckpointStore.files` gives them).

    None where those files cannot say, so that the caller scans instead: an operator with
    several stores per partition (a stream-stream join's four) or with column families
    (``transformWithState``), a partition without that version's zip (changelog checkpointing
    writes one only every few versions; checkpoint format 2 names it by a unique id), a
    metadata entry that is not the one described above, or a count of 0 beside SST files (a
    store that does not track its rows)."""
    version = f"{batch + 1}.zip"
    ops: dict[int, set[int]] = {}
    for rel in files:
        parts = rel.split("/")
        if len(parts) < 4 or parts[0] != "state" or not parts[1].isdigit():
            continue
        if not parts[2].isdigit():
            continue  # the operator's _metadata
        if len(parts) > 4 and parts[3] not in ("SSTs", "_metadata"):
            return None  # a store per name under the partition: a join's sides
        found = ops.setdefault(int(parts[1]), set())
        if len(parts) == 4 and parts[3] == version:
            found.add(int(parts[2]))
    if not ops:
        return None
    keys: dict[int, int] = {}
    for op, found in sorted(ops.items()):
        if found != set(range(partitions)):
            return None
        total = 0
        for part in range(partitions):
            n = _zip_keys(store, f"state/{op}/{part}/{version}")
            if n is None:
                return None
            total += n
        keys[op] = total
    return keys


def _zip_keys(store: CheckpointStore, rel: str) -> int | None:
    try:
        data = store.read_bytes(*rel.split("/"), limit=MAX_STATE_ZIP_BYTES)
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            lines = z.read("metadata").decode("utf-8").splitlines()
        meta = json.loads(lines[1])
    except (OSError, KeyError, IndexError, ValueError, zipfile.BadZipFile):
        return None  # StoreError (too large) is an OSError; a bad entry: scan instead
    if not isinstance(meta, dict) or meta.get("columnFamilyMapping"):
        return None
    n, ssts = meta.get("numKeys"), meta.get("sstFiles")
    if not isinstance(n, int) or isinstance(n, bool) or n < 0 or not isinstance(ssts, list):
        return None
    if n == 0 and ssts:
        return None  # rows not tracked: the count says nothing
    return n


def state_rows(spark: SparkSession, location: str, batch: int | None = None) -> dict[int, int]:
    """Rows in state per operator id, as of the last committed batch (or ``batch``)."""
    meta = spark.read.format("state-metadata").load(location).collect()
    rows: dict[int, int] = {}
    seen_joins: set[int] = set()
    for m in meta:
        op = int(m["operatorId"])
        name = str(m["operatorName"] or "")
        reader = spark.read.format("statestore").option("operatorId", op)
        if batch is not None:
            reader = reader.option("batchId", batch)
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
