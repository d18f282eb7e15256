"""The pod stories of `make test`'s two lanes take turns: the kind tier's cluster story waits
until the test bed lane's node tier has ended.

Both run real pods under CPU limits on the same two cores (the node tier's stories on the test
bed's node, the kind tier's burst on three kind nodes), and each judges time: a batch after a
recovery, a trace played and caught up. The kind burst beside the node tier's pods ran past its
1,200 s bound (docs/benchmark.md, "A layout that did not hold"); lane order alone kept them
apart only while each lane ran at its usual pace, and which lane reaches its pods first depends
on the day. So the test bed lane says when its node tier is done (it writes the file that
``$TEST_NODE_TIER_DONE`` names, which hack/test.sh sets for its lanes), and the kind tier waits
for that file before its first test.

Outside hack/test.sh's lanes (the variable unset: one tier alone, the serial mode) nobody waits.
tests/unit/test_lanes.py holds the hand-over; tests/conftest.py says it, the kind fixture waits.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

DONE_ENV = "TEST_NODE_TIER_DONE"
NODE_TIER = "tests/integration/node/"
WAIT_SECONDS = 2400.0
"""How long the kind tier waits for the node tier at most: the node tier's longest run on
record (1,279 s on a slow day) with room; past it the kind tier runs anyway and says so (the
other lane may have died without saying so)."""


def done_file() -> Path | None:
    path = os.environ.get(DONE_ENV)
    return Path(path) if path else None


def last_node_test(nodeids: Sequence[str]) -> str | None:
    """The node tier's last test in this session's order, or None if it runs none."""
    return next((n for n in reversed(nodeids) if n.startswith(NODE_TIER)), None)


def say_node_tier_done() -> None:
    """Write the hand-over file (idempotent; nothing when no lane asked for it)."""
    path = done_file()
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()


def _to_terminal(line: str) -> None:
    """Past pytest's capture: the lane's log shows the wait even when the test passes."""
    print(line, file=sys.__stderr__, flush=True)


def wait_for_node_tier(say: Callable[[str], None] = _to_terminal,
                       timeout: float = WAIT_SECONDS, every: float = 2.0) -> float:
    """Wait until the node tier said it is done, at most ``timeout`` s; the seconds waited."""
    path = done_file()
    if path is None:
        return 0.0
    if path.exists():
        return 0.0
    t0 = time.monotonic()
    say(f"lanes: waiting for the test bed lane's node tier to end ({path})")
    while not path.exists():
        if time.monotonic() - t0 >= timeout:
            say(f"lanes: the node tier did not end in {timeout:.0f} s; running beside it")
            break
        time.sleep(every)
    waited = time.monotonic() - t0
    say(f"lanes: waited {waited:.0f} s for the node tier")
    return waited
