"""The driver JVM's environment: loopback pins for a mini-cluster, none in a driver pod."""

from __future__ import annotations

from operators.query.session import LOOPBACK_ENV, session_env


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
