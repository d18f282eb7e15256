"""The Python warm-up runs in the Python workers a Python source's reads then reuse.

Spark keeps a pool of Python workers per environment; its SQL runners (a Python data source's
reads among them) put settings of the session into that environment which its RDD runner does
not, so a warm-up run as an RDD job warms workers no read ever uses. The warm-up imports a
module nothing else imports; a read of a Python data source after it must find that module
already imported in its worker (operators/query/warmup.py)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from operators.query.warmup import run_python

MARKER = "colorsys"
"""A standard module that neither PySpark's worker, pyarrow nor the data source API imports."""


class _WorkerReader(DataSourceReader):
    def partitions(self) -> list[InputPartition]:
        return [InputPartition(0)]

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        import os
        import sys as worker_sys

        yield (os.getpid(), MARKER in worker_sys.modules)


class WorkerProbe(DataSource):
    """A Python data source whose one row says which worker read it and whether that worker
    had imported :data:`MARKER` before."""

    @classmethod
    def name(cls) -> str:
        return "warmup_worker_probe"

    def schema(self) -> str:
        return "pid int, warmed boolean"

    def reader(self, schema: Any) -> DataSourceReader:
        return _WorkerReader()


def test_a_python_source_reads_in_a_worker_the_python_warm_up_prepared(local_spark) -> None:
    from pyspark import cloudpickle

    # the source's classes travel by value: the worker cannot import this test module
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    local_spark.dataSource.register(WorkerProbe)
    # one slot (local[1]): the tasks run one after another, each in the idle worker longest
    # unused, so four of them reach every idle worker the session's earlier jobs left
    assert run_python(local_spark, tasks=4, modules=(MARKER,), min_seconds=0.0) == 40
    rows = local_spark.read.format("warmup_worker_probe").load().collect()
    assert [r["warmed"] for r in rows] == [True], (
        f"the source's read ran in a worker the warm-up never reached: {rows}")
