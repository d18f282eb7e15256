"""A start's wait for its executors (``operators.query.session.ExecutorPool.settle``) on a clock
of the test's: the executors Spark registers, and those the scheduler has no node with room for,
are the seam (Spark's block manager view and the API server's pods, which the kind tier's
lost-node story runs for real)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from operators.query import session
from operators.query.session import ExecutorPool


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


class Pool(ExecutorPool):
    """The pool's Spark calls answered from ``registered(t)``: executors live at time t."""

    def __init__(self, clock: Clock, registered: Callable[[float], int]) -> None:
        self.clock, self.registered = clock, registered
        self.cores, self.target = 1, None
        self.spark = type("Spark", (), {"conf": type("Conf", (), {
            "get": staticmethod(lambda _k, d=None: d)})()})()

    def live_count(self) -> int:
        return self.registered(self.clock.now)

    def request_total(self, n: int) -> bool:
        self.target = n
        return True

    def set_target(self, n: int, state_weight: dict[str, float] | None = None) -> list[str]:
        self.target = n
        return []


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    c = Clock()
    monkeypatch.setattr(session, "time", c)
    return c


def test_a_start_does_not_wait_for_executors_no_node_has_room_for(clock: Clock) -> None:
    # a recovery asks for 4 on the one worker a lost node left: 2 fit, 2 stay Pending
    pool = Pool(clock, lambda t: 2 if t >= 3 else 0)
    pool.settle(4, without_room=lambda: 2 if clock.now >= 1 else 0)
    assert pool.target == 4  # still asked for: they join once a node has room
    assert clock.now == pytest.approx(5.0, abs=0.5)  # the 2 stable for 2 s, not two timeouts


def test_without_that_view_the_start_spends_both_timeouts(clock: Clock) -> None:
    pool = Pool(clock, lambda t: 2 if t >= 3 else 0)
    pool.settle(4)  # off Kubernetes, or the pods could not be listed
    assert clock.now == pytest.approx(60.0, abs=0.5)


def test_executors_that_are_placed_and_starting_are_waited_for(clock: Clock) -> None:
    # 2 register at 3 s, the other 2 (scheduled, their JVMs starting) at 9 s
    pool = Pool(clock, lambda t: 4 if t >= 9 else 2 if t >= 3 else 0)
    pool.settle(4, without_room=lambda: 0)
    assert clock.now == pytest.approx(9.0, abs=0.5)


def test_an_executor_that_finds_room_while_the_start_waits_is_waited_for(clock: Clock) -> None:
    # 3 asked, 1 without room until 3 s (another pod went); it starts then and registers at 7 s
    pool = Pool(clock, lambda t: 3 if t >= 7 else 2 if t >= 2 else 0)
    pool.settle(3, without_room=lambda: 1 if clock.now < 3 else 0)
    assert clock.now == pytest.approx(7.0, abs=0.5)
