"""The driver's view of Spark's JVM (py4j), for the few calls pyspark has no Python API for.

pyspark types a session's gateway as optional (it is None once the session is stopped); every
caller here holds a live session, so a missing gateway is a stopped session, named as such."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def jvm(spark: SparkSession) -> Any:
    """``spark._jvm``: the JVM's packages (``jvm.org.apache.spark...``)."""
    view = spark._jvm
    if view is None:
        raise RuntimeError("the Spark session is stopped: no JVM to call")
    return view


def gateway(spark: SparkSession) -> Any:
    """The py4j gateway of the session's context (``new_array`` and the like)."""
    gw = spark.sparkContext._gateway
    if gw is None:
        raise RuntimeError("the Spark session is stopped: no py4j gateway")
    return gw
