"""A job's backlog from one progress event: the main source's probe, the records-only fallback,
and how several sources add up (unknown stays None, never 0)."""

from __future__ import annotations

import json

import pytest

from contracts.trace import parse_trace
from operators.offsets import topic_offsets
from operators.sources.backlog import backlog_from_progress
from operators.sources.base import SourceBacklog
from operators.sources.burst import BurstBacklogProbe
from operators.sources.burst_clock import BurstClock

# 1000 records/s from t=0: at now=8 s, 8000 records arrived. A batch ending at offset 5000 leaves
# 3000 waiting whatever Spark's latestOffset said when it planned the batch (Spark records it at
# planning: an uncapped source then reads all of it and latest - end is 0).
PROBE = BurstBacklogProbe(BurstClock(parse_trace("t,input_rate\n0,1000\n")))


def burst(offset: int, run_start_us: int | None = 0, stream: str = "main") -> str:
    value = {"offset": offset, "stream": stream}
    if run_start_us is not None:
        value["runStartUs"] = run_start_us
    return json.dumps(value)


def progress(*sources: tuple[object, object]) -> dict:
    return {"sources": [{"endOffset": e, "latestOffset": latest} for e, latest in sources]}


class KafkaLike:
    """A lag probe's answer without a broker: behind = latest - end per partition."""

    def after_batch(self, end: object, latest: object, now: float) -> SourceBacklog | None:
        done, last = topic_offsets(end), topic_offsets(latest)
        if done is None or last is None:
            return None
        behind = [last[t][p] - o for t, parts in done.items() for p, o in parts.items()]
        lags = tuple((t, p, last[t][p] - o, 4.0) for t, ps in done.items() for p, o in ps.items())
        total = sum(o for parts in last.values() for o in parts.values())
        return SourceBacklog(sum(behind), 4.0, total, len(behind), lags)


@pytest.mark.parametrize(
    ("sources", "probe", "expected"),
    [
        ([(burst(5000), burst(7000))], PROBE, SourceBacklog(3000.0, 3.0, 8000)),
        ([(burst(5000), burst(5000))], PROBE, SourceBacklog(3000.0, 3.0, 8000)),
        ([(burst(5000), burst(9000))], PROBE, SourceBacklog(4000.0, 3.0, 8000)),
        ([(burst(8000), burst(8000))], PROBE, SourceBacklog(0.0, 0.0, 8000)),
        ([(burst(5000, None), burst(7000, None))], PROBE, SourceBacklog(2000.0)),
        ([(burst(5000), burst(7000))], None, SourceBacklog(2000.0)),
        ([("5", "9")], PROBE, SourceBacklog(4.0)),
        ([(burst(5000), burst(7000)), (burst(7500, stream="right:j"), burst(7600))], PROBE,
         SourceBacklog(3500.0, 3.0, 16000)),
        ([('{"t":{"0":5,"1":7}}', '{"t":{"0":9,"1":7}}')], KafkaLike(),
         SourceBacklog(4.0, 4.0, 16, 2, (("t", 0, 4, 4.0), ("t", 1, 0, 4.0)))),
        ([(burst(5000), burst(7000))], KafkaLike(), SourceBacklog(2000.0)),
    ],
    ids=["burst-behind", "burst-read-all-it-planned-but-more-arrived",
         "burst-latest-ahead-of-the-clock", "burst-caught-up", "no-run-start-no-age",
         "no-probe-no-age", "numeric-offsets", "join-adds-up", "kafka",
         "burst-offsets-under-a-kafka-probe"],
)
def test_backlog_of_one_progress_event(sources, probe, expected) -> None:
    assert backlog_from_progress(progress(*sources), probe, now=8.0) == expected


@pytest.mark.parametrize(
    "p",
    [{}, {"sources": []}, progress(('{"logOffset": 3}', '{"logOffset": 4}')),
     progress((burst(5), None)), progress((None, None)), progress(("garbage", "garbage"))],
    ids=["no-sources-key", "no-sources", "file-log-index", "no-latest", "no-offsets", "not-json"],
)
def test_no_source_with_known_offsets_is_unknown_not_zero(p) -> None:
    assert backlog_from_progress(p, PROBE, now=8.0) is None


def test_an_unknown_age_does_not_hide_a_known_one() -> None:
    p = progress((burst(5000, None), burst(5100, None)), (burst(5000), burst(7000)))
    b = backlog_from_progress(p, PROBE, now=8.0)
    assert b is not None and (b.records, b.age_seconds) == (3100.0, 3.0)


def test_kafka_offsets_without_a_probe_give_records_and_partition_lags() -> None:
    # A user's own Kafka job: no probe of ours, Spark's offsets as JSON strings in the progress.
    end = json.dumps({"clicks": {"0": 100, "1": 250}})
    latest = json.dumps({"clicks": {"0": 160, "1": 250, "2": 7}})
    b = backlog_from_progress({"sources": [{"endOffset": end, "latestOffset": latest}]}, None)
    assert b is not None
    assert b.records == 67  # a partition new since the batch is read from its start
    assert b.age_seconds is None and b.source_partitions == 3
    assert sorted(b.partition_lags) == [("clicks", 0, 60.0, None), ("clicks", 1, 0.0, None),
                                        ("clicks", 2, 7.0, None)]


def test_a_burst_source_tells_what_arrived_while_a_batch_runs() -> None:
    """The runner asks during a long batch (no progress comes until it ends): the clock's
    records by now in the run the batch's end offset belongs to, counted as after a batch."""
    end = json.dumps({"offset": 2_000, "runStartUs": 0})
    assert PROBE.arrived(end, 5.0) == pytest.approx(5_000)
    after = PROBE.after_batch(end, end, 5.0)
    assert after is not None and after.arrived_total == PROBE.arrived(end, 5.0)
    assert PROBE.arrived(json.dumps({"offset": 2_000}), 5.0) is None  # no run start: unknown
    assert PROBE.arrived(json.dumps({"t": {"0": 5}}), 5.0) is None  # not a burst offset
