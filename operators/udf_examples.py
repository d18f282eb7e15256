"""Sample user operators for the ``custom`` hook (``type: custom``, ``function: module:name``).

A user operator is a function ``(DataFrame, options: dict[str, str]) -> DataFrame`` built from
Spark SQL (keep per-key Python state out of it: ~300x slower, docs/spark-facts.md). Set
``stateful: true`` in the manifest when it keeps keyed state, so the autoscaler knows::

    - type: custom
      name: bucketed
      function: operators.udf_examples:add_bucket
      options: {column: value, buckets: "10"}
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def add_bucket(df: DataFrame, options: dict[str, str]) -> DataFrame:
    """Adds ``bucket`` = ``<column> % <buckets>`` (options ``column``, default ``value``;
    ``buckets``, default 10): a stateless operator."""
    from pyspark.sql import functions as F

    column = options.get("column", "value")
    buckets = int(options.get("buckets", "10"))
    if buckets < 1:
        raise ValueError(f"buckets must be >= 1, got {buckets}")
    return df.withColumn("bucket", F.pmod(F.col(column), F.lit(buckets)))
