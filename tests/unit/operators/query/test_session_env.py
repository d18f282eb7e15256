"""The driver JVM's environment: loopback pins for a mini-cluster, none in a driver pod; the
image's class archive (or, in a local run, the install's) for the driver's and executors'
JVMs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from contracts.spark import spark_conf_problem
from contracts.streamjob import StreamJobSpec
from operators.query.cluster import JVM_ARCHIVE_ENV, jvm_archive, spark_home
from operators.query.session import (
    JVM_ARCHIVE_KEYS,
    LOOPBACK_ENV,
    SessionOptions,
    jvm_archive_conf,
    session_conf,
    session_env,
)


def test_a_mini_cluster_driver_stays_on_loopback() -> None:
    env = session_env("spark://127.0.0.1:7077")
    assert env["SPARK_LOCAL_IP"] == "127.0.0.1" and env["SPARK_LOCAL_HOSTNAME"] == "localhost"
    assert env["PYSPARK_PYTHON"] and "PYTHONPATH" in env


def test_a_driver_pod_listens_on_its_pod_address() -> None:
    """In a pod, Spark's UI (the runner's REST source) must answer on the address its URL
    names (the driver's Service), not on 127.0.0.1 only (found on the real node)."""
    env = session_env("k8s://https://kubernetes.default.svc")
    assert not set(LOOPBACK_ENV) & set(env)
    assert env["PYSPARK_PYTHON"] and "SPARK_HOME" in env


def _spec(**spark: object) -> StreamJobSpec:
    return StreamJobSpec.model_validate({
        "source": {"type": "burst", "trace": "t.csv", "keys": 10, "partitions": 1},
        "pipeline": [{"type": "aggregate", "name": "count-per-key", "keys": ["key"]}],
        "sink": {"type": "files", "path": "out", "format": "parquet", "outputMode": "update"},
        "checkpoint": {"location": "cp"},
        "spark": spark,
    })


def test_the_drivers_and_executors_jvms_map_the_class_archive_the_image_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the image's archive is, both JVMs get it through Spark's defaultJavaOptions,
    which Spark prepends to the job's own extraJavaOptions (those stay the job's)."""
    archive = tmp_path / "spark-classes.jsa"
    archive.write_bytes(b"archive")
    monkeypatch.setenv(JVM_ARCHIVE_ENV, str(archive))
    conf = session_conf(_spec(conf={"spark.executor.extraJavaOptions": "-XX:+UseG1GC"}),
                        SessionOptions(master="spark://127.0.0.1:7077", ui_port=4040))
    for key in JVM_ARCHIVE_KEYS:
        assert conf[key] == f"-XX:SharedArchiveFile={archive}"
    assert conf["spark.executor.extraJavaOptions"] == "-XX:+UseG1GC"


def test_without_an_archive_the_jvms_start_as_spark_starts_them(tmp_path: Path) -> None:
    installed = tmp_path / "installed.jsa"
    assert jvm_archive_conf({}, installed) == {}
    assert jvm_archive_conf({JVM_ARCHIVE_ENV: str(tmp_path / "gone.jsa")}, installed) == {}
    installed.write_bytes(b"archive")
    # set but empty: off, even where the install has one
    assert jvm_archive_conf({JVM_ARCHIVE_ENV: ""}, installed) == {}


def test_a_local_run_maps_the_installs_archive_while_it_is_newer_than_pysparks_jars(
    tmp_path: Path
) -> None:
    """Unset, the variable leaves the install's archive (hack/jvm-archive/build.sh's) to a local
    run: the demo's and a runner's driver and executors, the mini-cluster's master and workers.
    An archive older than PySpark's jars was dumped on other jars: it is left alone."""
    installed = tmp_path / "spark-classes.jsa"
    installed.write_bytes(b"archive")
    jars = spark_home() / "jars"
    ahead = jars.stat().st_mtime + 60
    os.utime(installed, (ahead, ahead))
    assert jvm_archive({}, installed) == installed
    for key in JVM_ARCHIVE_KEYS:
        assert jvm_archive_conf({}, installed)[key] == f"-XX:SharedArchiveFile={installed}"
    stale = jars.stat().st_mtime - 60
    os.utime(installed, (stale, stale))
    assert jvm_archive({}, installed) is None
    assert jvm_archive_conf({}, installed) == {}


def test_a_job_cannot_set_the_flags_that_carry_the_archive() -> None:
    """The keys are the controller's: a job's JVM flags go through the vetted extraJavaOptions."""
    for key in JVM_ARCHIVE_KEYS:
        assert spark_conf_problem(key, "-javaagent:/x.jar") is not None, key
