"""operators.s3a: the pinned hadoop-aws version, the Spark conf for an endpoint, and finding the
resolved jars (without Spark: nothing here starts a JVM)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from operators.s3a import HADOOP_AWS_VERSION, JARS_ENV, hadoop_s3a_conf, s3a_jars
from tests.realcomponents import unavailable

ROOT = Path(__file__).resolve().parents[3]


def _pins() -> dict[str, str]:
    text = (ROOT / "hack" / "tools" / "s3a" / "versions.env").read_text(encoding="utf-8")
    return {k.strip(): v.strip() for k, v in (line.split("=", 1) for line in text.splitlines()
                                              if "=" in line and not line.lstrip().startswith("#"))}


def test_the_hadoop_aws_version_is_the_one_the_resolver_fetches() -> None:
    """The installed package cannot read hack/; the two pins must not drift."""
    assert _pins()["HADOOP_AWS_VERSION"] == HADOOP_AWS_VERSION


def test_the_hadoop_aws_version_is_pysparks_hadoop_when_pyspark_is_installed() -> None:
    """hadoop-aws is built against one hadoop-common: pyspark's shaded client of that version."""
    import importlib.util

    if importlib.util.find_spec("pyspark") is None:
        unavailable("pyspark is not installed (make setup)")  # fails under CI=true
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    api = sorted(p.name for p in jars.glob("hadoop-client-api-*.jar"))
    assert api == [f"hadoop-client-api-{HADOOP_AWS_VERSION}.jar"]


def test_conf_for_a_plain_http_endpoint() -> None:
    assert hadoop_s3a_conf("http://127.0.0.1:9000/") == {
        "spark.hadoop.fs.s3a.endpoint": "http://127.0.0.1:9000",
        "spark.hadoop.fs.s3a.endpoint.region": "us-east-1",
        "spark.hadoop.fs.s3a.path.style.access": "true",
        "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
    }


def test_conf_for_an_https_endpoint_enables_tls() -> None:
    conf = hadoop_s3a_conf("https://s3.example.test", region="eu-west-1", path_style=False)
    assert conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] == "true"
    assert conf["spark.hadoop.fs.s3a.endpoint.region"] == "eu-west-1"
    assert conf["spark.hadoop.fs.s3a.path.style.access"] == "false"
    assert all(k.startswith("spark.hadoop.fs.s3a.") for k in conf)


@pytest.mark.parametrize("endpoint", ["127.0.0.1:9000", "s3a://bucket", "http://", ""])
def test_conf_refuses_what_is_not_an_http_url(endpoint: str) -> None:
    with pytest.raises(ValueError, match="not an http"):
        hadoop_s3a_conf(endpoint)


def test_missing_jars_name_the_directory_and_make_tools(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(JARS_ENV, raising=False)
    monkeypatch.setenv("SA_S3A_CACHE", str(tmp_path))
    expected = tmp_path / f"hadoop-aws-{HADOOP_AWS_VERSION}"
    with pytest.raises(ValueError, match="make tools") as err:
        s3a_jars()
    assert str(expected) in str(err.value)
    # Jars without the resolver's stamp are a half-done resolve: still missing.
    expected.mkdir()
    (expected / "hadoop-aws.jar").write_bytes(b"")
    with pytest.raises(ValueError, match=re.escape(str(expected))):
        s3a_jars()
    (expected / ".stamp").write_text("x\n")
    assert s3a_jars() == [str(expected / "hadoop-aws.jar")]


def test_the_override_is_a_directory_of_jars(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(JARS_ENV, str(tmp_path))
    with pytest.raises(ValueError, match=re.escape(str(tmp_path))):
        s3a_jars()
    for name in ("b.jar", "a.jar", "notes.txt"):
        (tmp_path / name).write_bytes(b"")
    assert s3a_jars() == [str(tmp_path / "a.jar"), str(tmp_path / "b.jar")]


def test_the_image_bakes_in_the_jars_of_the_resolvers_versions() -> None:
    """docker/s3a-jars.txt (the image's S3A; docker/ cannot read hack/) names hadoop-aws and the
    AWS SDK modules of versions.env's versions, each pinned by a SHA-256, and nothing pyspark
    already ships (a second copy on the classpath would conflict)."""
    pins = _pins()
    listed = [line.split() for line in
              (ROOT / "docker" / "s3a-jars.txt").read_text(encoding="utf-8").splitlines()
              if line.strip() and not line.startswith("#")]
    names = {path.rsplit("/", 1)[1] for path, _ in listed}
    assert f"hadoop-aws-{pins['HADOOP_AWS_VERSION']}.jar" in names
    assert f"s3-{pins['AWS_SDK_VERSION']}.jar" in names
    assert f"analyticsaccelerator-s3-{pins['ANALYTICS_ACCELERATOR_VERSION']}.jar" in names
    assert f"spark-hadoop-cloud_2.13-{pins['SPARK_HADOOP_CLOUD_VERSION']}.jar" in names
    sdk = [p for p, _ in listed if p.startswith("software/amazon/awssdk/")]
    assert sdk and all(f"/{pins['AWS_SDK_VERSION']}/" in p for p in sdk)
    assert all(len(sha) == 64 and int(sha, 16) >= 0 for _, sha in listed)
    assert not any(n.startswith(("netty-all", "httpclient-", "commons-codec", "slf4j-"))
                   for n in names)


def test_a_checkpoint_on_s3a_gets_sparks_object_store_checkpoint_manager() -> None:
    """Spark's own manager for object stores (spark-hadoop-cloud) unless the job names one; a
    directory keeps Spark's default."""
    from contracts.streamjob import StreamJobSpec
    from operators.query.job import (
        CHECKPOINT_MANAGER_KEY,
        OBJECT_STORE_CHECKPOINT_MANAGER,
        spark_conf_for,
    )

    def spec(location: str, conf: dict[str, str] | None = None) -> StreamJobSpec:
        return StreamJobSpec.model_validate({
            "source": {"type": "burst", "trace": "t.csv"},
            "pipeline": [{"type": "aggregate", "name": "c", "keys": ["key"]}],
            "sink": {"type": "noop"}, "checkpoint": {"location": location},
            "spark": {"conf": conf or {}}})

    assert spark_conf_for(spec("s3a://b/cp"))[CHECKPOINT_MANAGER_KEY] == \
        OBJECT_STORE_CHECKPOINT_MANAGER
    assert CHECKPOINT_MANAGER_KEY not in spark_conf_for(spec("/data/cp"))
    mine = spark_conf_for(spec("s3a://b/cp", {CHECKPOINT_MANAGER_KEY: "my.Manager"}))
    assert mine[CHECKPOINT_MANAGER_KEY] == "my.Manager"
