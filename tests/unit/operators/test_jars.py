"""Jars found for ``spark.jars`` (operators/jars.py): the resolver's cache or the variable that
names them instead — the same rules for Kafka's connector and S3A."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from operators.errors import KafkaSourceError
from operators.jars import JarSet
from operators.sources.kafka import JARS_ENV as KAFKA_ENV
from operators.sources.kafka import SPARK_KAFKA_VERSION, kafka_jars

JARS = JarSet(what="the test's jars", env="SA_TEST_JARS", cache_env="SA_TEST_CACHE",
              cache_name="test", dirname="test-1.0", script="hack/tools/test/resolve.sh")


def test_comma_separated_jars_are_taken_in_order_and_a_missing_one_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = tmp_path / "a.jar", tmp_path / "b.jar"
    a.write_bytes(b"")
    monkeypatch.setenv("SA_TEST_JARS", f"{b}, {a}")
    with pytest.raises(ValueError, match=f"SA_TEST_JARS: no such jar\\(s\\): {re.escape(str(b))}$"):
        JARS.paths()
    b.write_bytes(b"")
    assert JARS.paths() == [str(b), str(a)]


def test_the_cache_is_used_only_once_stamped_and_its_error_says_how_to_fill_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SA_TEST_JARS", raising=False)
    monkeypatch.setenv("SA_TEST_CACHE", str(tmp_path))
    d = tmp_path / "test-1.0"
    d.mkdir()
    (d / "x.jar").write_bytes(b"")
    with pytest.raises(ValueError) as err:
        JARS.paths()
    assert str(err.value) == (f"the test's jars are not resolved in {d}: run `make tools` "
                              "(hack/tools/test/resolve.sh) or set SA_TEST_JARS")
    (d / ".stamp").write_text("x\n")
    assert JARS.paths() == [str(d / "x.jar")]


def test_kafka_names_its_own_cache_and_raises_its_source_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(KAFKA_ENV, raising=False)
    monkeypatch.setenv("SA_KAFKA_CACHE", str(tmp_path))
    with pytest.raises(KafkaSourceError, match=re.escape(
            f"Spark's Kafka connector jars are not resolved in "
            f"{tmp_path / f'spark-kafka-{SPARK_KAFKA_VERSION}'}: run `make tools`")):
        kafka_jars()
