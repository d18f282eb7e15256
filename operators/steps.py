"""Timing the steps of an action or a start (:class:`contracts.runner_api.Step`).

Usage::

    steps: dict[str, float] = {}
    with timed(steps, Step.DRAIN):
        ...                      # steps["drain"] += seconds spent here, even when it raises

A step's figure is its own duration (not a time since the action began), so the figures of one
action add up to the time it kept the job from committing batches; a step run twice (a drain
before the repartition and another at start) adds up. ``None`` instead of a dict times nothing,
so a step shared by callers that do and do not keep figures needs no second code path.
(tests/unit/operators/test_steps.py)
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager

from contracts.runner_api import Step


@contextmanager
def timed(steps: dict[str, float] | None, step: Step) -> Iterator[None]:
    """Add the seconds the ``with`` body takes to ``steps[step]`` (also when it raises)."""
    start = time.monotonic()
    try:
        yield
    finally:
        if steps is not None:
            steps[step.value] = steps.get(step.value, 0.0) + time.monotonic() - start


def process_seconds() -> float | None:
    """Seconds since this process started, from the kernel's record of its start (Linux:
    ``/proc/self/stat``'s start time against ``/proc/uptime``, both on the boot clock, so also
    right in a container); None where those are not readable. A start's ``process`` step: what
    the interpreter and the imports cost before the runner's first line of work
    (tests/unit/operators/test_steps.py::test_a_process_knows_how_long_it_has_run)."""
    try:
        with open("/proc/self/stat", encoding="ascii") as f:
            stat = f.read()
        with open("/proc/uptime", encoding="ascii") as f:
            uptime = float(f.read().split()[0])
        # the fields after the command's closing parenthesis; the start time is field 22
        started_ticks = int(stat.rsplit(")", 1)[1].split()[19])
        return max(uptime - started_ticks / os.sysconf("SC_CLK_TCK"), 0.0)
    except (OSError, ValueError, IndexError):
        return None
