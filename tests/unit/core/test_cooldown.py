"""decide() around the cooldown (controller/core/cooldown.py): when the last action holds the
next one back, and the two exceptions — load that outgrew the last scale-out, and a scale-in
whose load came back (or whose lag grows) — against a scale-in's own transient."""

from __future__ import annotations

import pytest

from tests.unit.core.factories import COOLDOWN_CASES, Case, check


@pytest.mark.parametrize("case", COOLDOWN_CASES, ids=[c.id for c in COOLDOWN_CASES])
def test_cooldown(case: Case) -> None:
    check(case)
