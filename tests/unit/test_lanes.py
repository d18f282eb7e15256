"""tests/lanes.py: the node tier's end handed to the kind tier through a file."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from tests import lanes


def test_the_last_node_test_is_the_last_of_the_tier_in_session_order() -> None:
    ids = ["tests/integration/k8s/test_a.py::t", "tests/integration/node/test_b.py::t1",
           "tests/integration/node/test_c.py::t2", "tests/integration/s3/test_d.py::t"]
    assert lanes.last_node_test(ids) == "tests/integration/node/test_c.py::t2"
    assert lanes.last_node_test(ids[:1] + ids[3:]) is None


def test_without_the_variable_nobody_waits_and_nothing_is_written(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(lanes.DONE_ENV, raising=False)
    lanes.say_node_tier_done()
    assert lanes.wait_for_node_tier(timeout=0.0) == 0.0


def test_the_kind_tier_waits_until_the_node_tier_says_it_is_done(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    done = tmp_path / "lanes" / "node-tier-done"
    monkeypatch.setenv(lanes.DONE_ENV, str(done))
    said: list[str] = []
    threading.Timer(0.3, lanes.say_node_tier_done).start()
    waited = lanes.wait_for_node_tier(said.append, timeout=10.0, every=0.05)
    assert done.exists()
    assert 0.25 <= waited < 5.0, waited
    assert said[0].startswith("lanes: waiting for the test bed lane's node tier"), said
    assert said[-1].startswith("lanes: waited"), said


def test_a_lane_that_never_says_so_is_waited_for_only_up_to_the_bound(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(lanes.DONE_ENV, str(tmp_path / "never"))
    said: list[str] = []
    t0 = time.monotonic()
    lanes.wait_for_node_tier(said.append, timeout=0.2, every=0.05)
    assert time.monotonic() - t0 < 2.0
    assert any("did not end in 0 s; running beside it" in s for s in said), said


def test_once_said_the_wait_is_none(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(lanes.DONE_ENV, str(tmp_path / "done"))
    lanes.say_node_tier_done()
    said: list[str] = []
    assert lanes.wait_for_node_tier(said.append, timeout=1.0) == 0.0
    assert said == []
