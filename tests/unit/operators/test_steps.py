"""operators.steps: each step's own seconds, added up when run twice, kept when it raises."""

from __future__ import annotations

import time

import pytest

from contracts.runner_api import Step
from operators.steps import process_seconds, timed


def test_a_step_records_its_own_duration_and_a_repeat_adds_up() -> None:
    steps: dict[str, float] = {}
    with timed(steps, Step.DRAIN):
        time.sleep(0.05)
    first = steps["drain"]
    assert 0.04 <= first < 1.0
    with timed(steps, Step.DRAIN):
        time.sleep(0.05)
    assert steps["drain"] >= first + 0.04
    assert list(steps) == ["drain"]


def test_a_step_that_raises_is_still_timed() -> None:
    steps: dict[str, float] = {}
    with pytest.raises(RuntimeError), timed(steps, Step.REWRITE):
        time.sleep(0.02)
        raise RuntimeError("the rewrite failed")
    assert steps["rewrite"] >= 0.015


def test_without_a_dict_the_body_runs_untimed() -> None:
    ran: list[str] = []
    with timed(None, Step.SNAPSHOT):
        ran.append("body")
    assert ran == ["body"]


def test_a_process_knows_how_long_it_has_run() -> None:
    """A child that sleeps before it asks has run at least that long, and not much longer."""
    import subprocess
    import sys

    code = ("import time; time.sleep(1.0); from operators.steps import process_seconds; "
            "print(process_seconds())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60).stdout.strip()
    if process_seconds() is None:
        assert out == "None"  # no /proc here: unknown, never a guess
        return
    assert 1.0 <= float(out) < 30.0, out
