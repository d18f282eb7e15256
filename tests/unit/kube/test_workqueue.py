"""The work queue in virtual time: dedup, one worker per key, delays, per-key backoff, bucket."""

from __future__ import annotations

import pytest

from controller.kube.workqueue import QueueSettings, WorkQueue


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def q(clock: Clock) -> WorkQueue:
    return WorkQueue(QueueSettings(base_delay_seconds=0.5, max_delay_seconds=8.0,
                                   retry_qps=10.0, retry_burst=100), clock=clock)


def test_a_key_is_queued_once(q: WorkQueue) -> None:
    q.add("a")
    q.add("a")
    q.add("b")
    assert len(q) == 2
    assert q.get(timeout=0) == "a"
    assert q.get(timeout=0) == "b"
    assert q.get(timeout=0) is None


def test_an_add_while_processing_waits_for_done(q: WorkQueue) -> None:
    q.add("a")
    key = q.get(timeout=0)
    q.add("a")  # a watch event while a worker has it: not handed to a second worker
    assert q.get(timeout=0) is None
    q.done(key)
    assert q.get(timeout=0) == "a"


def test_add_after_is_due_later_and_the_earliest_wins(q: WorkQueue, clock: Clock) -> None:
    q.add_after("a", 10)
    q.add_after("a", 5)
    q.add_after("a", 20)
    assert q.get(timeout=0) is None
    clock.t += 5
    assert q.get(timeout=0) == "a"
    q.done("a")
    clock.t += 100
    assert q.get(timeout=0) is None  # the later due times were superseded, not queued twice


def test_an_immediate_add_supersedes_a_pending_timer(q: WorkQueue, clock: Clock) -> None:
    q.add_after("a", 10)
    q.add("a")
    assert q.get(timeout=0) == "a"
    q.done("a")
    clock.t += 10
    assert q.get(timeout=0) is None


@pytest.mark.parametrize(
    ("failures", "delay"),
    [(1, 0.5), (2, 1.0), (3, 2.0), (4, 4.0), (5, 8.0), (9, 8.0)],
    ids=["first", "second", "third", "fourth", "ceiling", "stays-at-ceiling"],
)
def test_backoff_doubles_per_key_up_to_the_ceiling(q: WorkQueue, failures: int,
                                                   delay: float) -> None:
    got = [q.add_rate_limited("a") for _ in range(failures)][-1]
    assert got == pytest.approx(delay)
    assert q.add_rate_limited("b") == pytest.approx(0.5)  # per key


def test_forget_resets_the_backoff(q: WorkQueue) -> None:
    for _ in range(4):
        q.add_rate_limited("a")
    q.forget("a")
    assert q.add_rate_limited("a") == pytest.approx(0.5)


def test_the_bucket_spreads_a_storm_of_retries(clock: Clock) -> None:
    q = WorkQueue(QueueSettings(base_delay_seconds=0.01, retry_qps=10.0, retry_burst=5),
                  clock=clock)
    delays = [q.add_rate_limited(f"k{i}") for i in range(25)]
    assert max(delays[:5]) == pytest.approx(0.01)  # the burst goes at once
    assert delays[-1] == pytest.approx(2.0)  # then 10 per second


def test_shutdown_releases_waiting_workers(q: WorkQueue) -> None:
    q.shutdown()
    assert q.get(timeout=5) is None
    q.add("a")
    assert len(q) == 0
