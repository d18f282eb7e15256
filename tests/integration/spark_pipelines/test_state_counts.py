"""The RocksDB store's own key count (``operators.state.rows.committed_keys``) against the rows
Spark reads back: what a repartition's row check stands on."""

from __future__ import annotations

import pytest

from tests.realcomponents import require_module

require_module("pyspark")  # skips locally, fails in CI (tests/realcomponents.py)

from operators.state import inspect  # noqa: E402
from operators.state.repartition import repartition  # noqa: E402
from operators.state.rows import committed_keys, state_rows  # noqa: E402
from operators.state.store import open_store  # noqa: E402

pytestmark = pytest.mark.spark


def test_the_stores_count_is_the_rows_read_and_a_repartition_keeps_them(
    spark, tmp_path, load_spec, run_available, capped
):
    spec = capped(load_spec("wordcount", tmp_path), 30_000)
    run_available(spark, spec, backlog_seconds=4)
    loc = spec.checkpoint.location
    info = inspect(loc)
    last, parts = info.last_committed_batch, info.partitions
    assert last is not None and last >= 1 and parts is not None
    store = open_store(loc)
    files = [f.rel for f in store.files()]
    for batch in (last - 1, last):  # the state before the last batch's, and the last
        counted = committed_keys(store, files, batch, parts)
        assert counted is not None and sum(counted.values()) > 1000, counted
        assert counted == state_rows(spark, loc, batch), batch
    # counted: the last committed state's

    steps: dict[str, float] = {}
    result = repartition(spark, loc, parts + 1, steps=steps)
    assert result.rows_before == result.rows_after == sum(counted.values()) > 1000
    assert result.rows_before_from == "files"  # the store's count, not a second scan
    after = inspect(loc)
    assert after.partitions == parts + 1
    files = [f.rel for f in store.files()]
    # the new layout's zips count the same keys; the old layout stays readable at its batch
    assert committed_keys(store, files, result.batch, parts + 1) == state_rows(spark, loc)
    assert state_rows(spark, loc, last) == counted
    # a version the files do not hold: nothing said, the caller reads instead
    assert committed_keys(store, files, result.batch + 5, parts + 1) is None
    assert steps["count_rows"] >= 0


def test_a_join_has_a_store_per_side_and_is_read_instead(spark, tmp_path, load_spec,
                                                          run_available):
    spec = load_spec("impressions-clicks", tmp_path)
    run_available(spark, spec, backlog_seconds=3)
    loc = spec.checkpoint.location
    info = inspect(loc)
    assert info.last_committed_batch is not None and info.partitions is not None
    store = open_store(loc)
    files = [f.rel for f in store.files()]
    assert committed_keys(store, files, info.last_committed_batch, info.partitions) is None
