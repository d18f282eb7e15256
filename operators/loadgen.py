"""The Kafka load generator: a trace's records written into a topic, deterministic and verifiable.

    python -m operators.loadgen --bootstrap 127.0.0.1:9092 --topic clicks \\
        --trace traces/step.csv [--partitions 4] [--keys 1000] [--seed 7] [--duration 60]

Record ``seq = i`` is the burst source's record ``i`` (:mod:`operators.sources.burst`): its
``key``, ``value`` and ``event_time`` are pure functions of ``(seed, i)`` and the trace. It goes
to partition ``i % P`` with Kafka key ``key`` and the Kafka timestamp set to its *scheduled*
arrival (run start + the trace's arrival time of ``i``), so the backlog's age measured from
Kafka timestamps is the age the trace means even when the producer runs late. Value (JSON)::

    {"seq": 12, "key": "k0042", "value": 17, "event_time": "2026-11-21T10:00:00.123456Z"}

Parse it with the schema :data:`VALUE_SCHEMA`. :func:`check_records` tells whether rows read
back are exactly the generated ones. The producer is confluent-kafka (librdkafka): it batches and
compresses in C, ~190k records/s from one Python thread here, where a pure-Python client would
spend the core the job under test needs.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from contracts.streamjob import BurstSource
from operators.errors import BurstSourceError, OperatorsError

VALUE_SCHEMA = "seq BIGINT, key STRING, value BIGINT, event_time TIMESTAMP"
CHUNK = 5_000
"""Records generated per step (one Arrow batch); small enough to follow the trace within ~50 ms
at 100k records/s."""
TICK_SECONDS = 0.02
"""Sleep when caught up with the trace."""
FLUSH_TIMEOUT_SECONDS = 60.0
"""Longest wait for the broker to acknowledge the last records at the end of a run."""
PRODUCER_CONFIG = {
    "linger.ms": 20,
    "batch.num.messages": 10_000,
    "compression.type": "lz4",
    "queue.buffering.max.messages": 1_000_000,
    "enable.idempotence": True,  # a retried send is never written twice
    "acks": "all",
}


class LoadGenError(OperatorsError, RuntimeError):
    """The generator cannot run (no confluent-kafka, a bad trace, the broker refused records)."""


@dataclass(frozen=True)
class LoadStats:
    """What one run wrote."""

    first_seq: int
    records: int
    seconds: float
    behind: int
    """Records the trace had scheduled by the end that the producer did not manage to send."""
    run_start: float
    """Unix time of trace t=0 (event times and Kafka timestamps count from it)."""

    @property
    def rate(self) -> float:
        return self.records / self.seconds if self.seconds > 0 else 0.0


def burst_spec(trace: str | Path, keys: int = 1000, seed: int = 0, skew: float = 0.0,
               load_unit_rate: float | None = None) -> BurstSource:  # fmt: skip
    """The burst source whose records the generator writes (same keys, values, arrival)."""
    return BurstSource(
        trace=str(trace), keys=keys, seed=seed, skew=skew, load_unit_rate=load_unit_rate
    )


class LoadGenerator:
    """Writes records ``first_seq..`` of a trace into ``topic`` at the trace's rate."""

    def __init__(self, bootstrap: str, topic: str, source: BurstSource, partitions: int = 1,
                 first_seq: int = 0) -> None:  # fmt: skip
        from operators.sources.burst_records import BurstParams

        if partitions < 1:
            raise LoadGenError(f"partitions: {partitions} must be >= 1")
        try:
            self.params = BurstParams.for_source(source, run_start_us=0)
        except BurstSourceError as e:
            raise LoadGenError(str(e)) from None
        self.bootstrap, self.topic, self.partitions = bootstrap, topic, partitions
        self.first_seq = first_seq
        self.stop_event = threading.Event()
        self._errors: list[str] = []

    def create_topic(self, timeout: float = 30.0) -> None:
        """Create the topic with ``partitions`` partitions (fine if it exists with them)."""
        admin_mod = _confluent()
        admin = admin_mod.admin.AdminClient({"bootstrap.servers": self.bootstrap})
        futures = admin.create_topics(
            [admin_mod.admin.NewTopic(self.topic, self.partitions, 1)], operation_timeout=timeout
        )
        for fut in futures.values():
            try:
                fut.result(timeout)
            except Exception as e:
                if "TOPIC_ALREADY_EXISTS" not in str(e):
                    raise LoadGenError(f"creating topic {self.topic}: {e}") from None

    def run(self, duration: float, run_start: float | None = None,
            max_records: int | None = None) -> LoadStats:  # fmt: skip
        """Follow the trace for ``duration`` s (or until ``max_records`` or :attr:`stop_event`);
        returns when the broker acknowledged everything sent."""
        from operators.sources.burst_records import generate

        producer = _confluent().Producer(
            {"bootstrap.servers": self.bootstrap, **PRODUCER_CONFIG, "log_level": 3}
        )
        clock = self.params.clock()
        t0 = time.time() if run_start is None else run_start
        run_us = round(t0 * 1e6)
        sent = self.first_seq
        limit = sys.maxsize if max_records is None else self.first_seq + max_records
        deadline = time.time() + duration
        target = sent
        while not self.stop_event.is_set():
            now = time.time()
            target = min(clock.available(now - t0), limit)
            while sent < target and not self.stop_event.is_set():
                hi = min(target, sent + CHUNK)
                self._produce(producer, generate(self.params, sent, hi, run_us))
                sent = hi
            if now >= deadline or sent >= limit or self._errors:
                break
            time.sleep(TICK_SECONDS)
        left = producer.flush(FLUSH_TIMEOUT_SECONDS)
        if self._errors or left:
            raise LoadGenError(
                f"topic {self.topic}: {len(self._errors)} record(s) refused "
                f"({'; '.join(self._errors[:3])}), {left} unacknowledged"
            )
        return LoadStats(self.first_seq, sent - self.first_seq, time.time() - t0,
                         max(0, target - sent), t0)  # fmt: skip

    def _produce(self, producer: Any, batch: Any) -> None:
        seqs = batch.column("offset").to_numpy()
        keys = batch.column("key").to_pylist()
        values = batch.column("value").to_numpy()
        event_us = batch.column("event_time").cast("int64").to_numpy()
        stamps = np.datetime_as_string(event_us.astype("datetime64[us]"), unit="us")
        parts = seqs % self.partitions
        for i in range(len(seqs)):
            value = (f'{{"seq":{seqs[i]},"key":"{keys[i]}","value":{values[i]},'
                     f'"event_time":"{stamps[i]}Z"}}')  # fmt: skip
            while True:
                try:
                    producer.produce(self.topic, value.encode(), keys[i].encode(),
                                     partition=int(parts[i]), timestamp=int(event_us[i] // 1000),
                                     on_delivery=self._delivered)  # fmt: skip
                    break
                except BufferError:  # local queue full: let librdkafka send, then retry
                    producer.poll(0.05)
        producer.poll(0)

    def _delivered(self, err: Any, msg: Any) -> None:
        if err is not None and len(self._errors) < 100:
            self._errors.append(str(err))


def _confluent() -> Any:
    try:
        import confluent_kafka
        import confluent_kafka.admin
    except ImportError:
        raise LoadGenError(
            "the load generator needs confluent-kafka: pip install -e '.[spark]' (make setup)"
        ) from None
    return confluent_kafka


def check_records(rows: Any, source: BurstSource, run_start: float, first_seq: int = 0,
                  count: int | None = None) -> list[str]:  # fmt: skip
    """Problems with ``rows`` (a pandas DataFrame with :data:`VALUE_SCHEMA`'s columns) as the
    generated records ``first_seq..first_seq+count``: missing or duplicated seqs, a key, value
    or event time that is not the generated one. Empty = exactly the generated records."""
    from operators.sources.burst_records import BurstParams, generate

    problems: list[str] = []
    seqs = rows["seq"].to_numpy(dtype=np.int64)
    n = int(count if count is not None else (seqs.max() + 1 - first_seq if len(seqs) else 0))
    uniq, counts = np.unique(seqs, return_counts=True)
    if (counts > 1).any():
        problems.append(f"{int((counts > 1).sum())} seq(s) more than once, e.g. "
                        f"{uniq[counts > 1][:3].tolist()}")  # fmt: skip
    want = np.arange(first_seq, first_seq + n, dtype=np.int64)
    missing = np.setdiff1d(want, uniq)
    extra = np.setdiff1d(uniq, want)
    if len(missing):
        problems.append(f"{len(missing)} seq(s) missing, e.g. {missing[:3].tolist()}")
    if len(extra):
        problems.append(f"{len(extra)} unexpected seq(s), e.g. {extra[:3].tolist()}")
    if problems or n == 0:
        return problems
    params = BurstParams.for_source(source, run_start_us=0)
    gen = generate(params, first_seq, first_seq + n, round(run_start * 1e6))
    got = rows.sort_values("seq")
    for col in ("key", "value"):
        bad = got[col].to_numpy() != np.asarray(gen.column(col).to_pylist())
        if bad.any():
            problems.append(f"{int(bad.sum())} record(s) with another {col} than generated")
    got_us = got["event_time"].astype("int64").to_numpy() // _unit_us(got["event_time"])
    want_us = gen.column("event_time").cast("int64").to_numpy()
    if (got_us != want_us).any():
        problems.append(f"{int((got_us != want_us).sum())} record(s) with another event_time")
    return problems


def _unit_us(series: Any) -> int:
    """Divisor from pandas' datetime resolution to microseconds."""
    unit = str(series.dtype)
    return 1000 if "ns" in unit else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m operators.loadgen", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bootstrap", required=True, help="host:port of a broker")
    ap.add_argument("--topic", required=True)
    ap.add_argument("--trace", required=True, help="CSV t,input_rate (or t,load with "
                    "--load-unit-rate)")
    ap.add_argument("--partitions", type=int, default=1, help="record i -> partition i %% P; "
                    "the topic is created with P partitions if missing")
    ap.add_argument("--keys", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--skew", type=float, default=0.0)
    ap.add_argument("--load-unit-rate", type=float, default=None)
    ap.add_argument("--duration", type=float, default=None, help="s (default: the trace's)")
    ap.add_argument("--first-seq", type=int, default=0, help="resume a run at this record")
    args = ap.parse_args(argv)
    try:
        source = burst_spec(args.trace, args.keys, args.seed, args.skew, args.load_unit_rate)
        gen = LoadGenerator(args.bootstrap, args.topic, source, args.partitions, args.first_seq)
        gen.create_topic()
        duration = args.duration or gen.params.clock().trace.duration
        stats = gen.run(duration)
    except (LoadGenError, ValueError) as e:
        print(f"loadgen: {e}", file=sys.stderr)
        return 1
    print(f"loadgen: wrote records {stats.first_seq}..{stats.first_seq + stats.records - 1} to "
          f"{args.topic} in {stats.seconds:.1f} s ({stats.rate:,.0f} records/s; "
          f"{stats.behind} behind the trace); run start {stats.run_start:.6f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
