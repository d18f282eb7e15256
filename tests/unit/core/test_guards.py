"""The guards' wording (controller/core/guards.py): a reason quotes a share against its limit
as a person reads it; the guards' decisions are in test_engine.py's guard table."""

from __future__ import annotations

import pytest

from controller.core.guards import below

BELOW = [
    # (share, limit, printed): whole percents where they differ, one decimal where they would not
    (0.14, 0.40, "14% (< 40%)"),
    (0.394, 0.40, "39% (< 40%)"),
    (0.396, 0.40, "39.6% (< 40%)"),  # whole percents: "40% (< 40%)"
    (0.3999, 0.40, "39.9% (< 40%)"),  # one decimal, rounded, would say 40.0%
    (0.2996, 0.30, "29.9% (< 30%)"),
    (0.0, 0.30, "0% (< 30%)"),
]


@pytest.mark.parametrize(("share", "limit", "printed"), BELOW)
def test_a_share_under_its_limit_never_prints_as_equal(share, limit, printed) -> None:
    assert below(share, limit) == printed
