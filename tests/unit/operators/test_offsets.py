"""The one parser of source offsets: each shape, as JSON text or parsed, and hostile input."""

from __future__ import annotations

import pytest

from operators.offsets import (
    BurstOffset,
    burst_offset,
    offset_value,
    record_count,
    topic_offsets,
    topic_offsets_json,
)

BURST = '{"offset": 5000, "runStartUs": 2000000, "stream": "right:j"}'
KAFKA = '{"t":{"0":5,"1":7}}'


@pytest.mark.parametrize(
    ("raw", "burst", "count", "kafka"),
    [
        (BURST, BurstOffset(5000, 2_000_000, "right:j"), 5000.0, None),
        ({"offset": 3, "runStartUs": 0}, BurstOffset(3, 0, "main"), 3.0, None),
        ('{"offset": 7}', BurstOffset(7, None, "main"), 7.0, None),
        (KAFKA, None, None, {"t": {0: 5, 1: 7}}),
        ({"a": {"0": 1}, "b": {"2": 3}}, None, None, {"a": {0: 1}, "b": {2: 3}}),
        ("12", None, 12.0, None),
        (12.5, None, 12.5, None),
        ('{"logOffset": 3}', None, None, None),
        ("not json", None, None, None),
        ("", None, None, None),
        (None, None, None, None),
        ("{}", None, None, None),
        ('{"t": {"x": 1}}', None, None, None),
        ('{"t": 5}', None, None, None),
        ('{"offset": "5"}', None, None, None),
        ('{"offset": 5, "runStartUs": "soon"}', None, 5.0, None),
        ("true", None, None, None),
    ],
    ids=[
        "burst-text", "burst-mapping", "burst-without-run-start", "kafka-text", "kafka-two-topics",
        "number-text", "number", "file-log-index", "not-json", "empty", "none", "empty-object",
        "kafka-bad-partition", "kafka-not-nested", "offset-as-string", "run-start-not-number",
        "boolean",
    ],
)
def test_each_shape_is_read_by_its_parser_only(raw, burst, count, kafka) -> None:
    assert burst_offset(raw) == burst
    assert record_count(raw) == count
    assert topic_offsets(raw) == kafka


def test_run_start_in_seconds() -> None:
    offset = burst_offset(BURST)
    assert offset is not None and offset.run_start == 2.0
    assert BurstOffset(1, None).run_start is None


def test_kafka_offsets_round_trip_through_the_connector_json() -> None:
    offsets = {"t": {0: 5, 1: 7}}
    assert topic_offsets(topic_offsets_json(offsets)) == offsets


def test_a_parsed_value_is_taken_as_it_is() -> None:
    value = {"offset": 1}
    assert offset_value(value) is value
    assert offset_value(b'{"offset": 1}') == value
