"""The ``--chaos`` spec shared by ``demo`` and ``simulate``: faults to inject, and when.

    parse_chaos("kill-driver@120,kill-prometheus@60")
    -> [ChaosEvent(60.0, "kill-prometheus"), ChaosEvent(120.0, "kill-driver")]

Each host says which kinds it can inject (the simulator models only a driver failure).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from contracts.errors import ContractError

CHAOS_KINDS = ("kill-driver", "kill-executor", "kill-prometheus")
"""Every fault a run can inject: the driver process, one executor, the metrics store."""


class ChaosError(ContractError):
    """A --chaos spec that cannot be parsed."""


@dataclass(frozen=True, order=True)
class ChaosEvent:
    """One fault: ``kind`` at ``at`` seconds after the run starts."""

    at: float
    kind: str


def parse_chaos(spec: str | None, kinds: Sequence[str] = CHAOS_KINDS) -> list[ChaosEvent]:
    """``KIND@SECONDS[,KIND@SECONDS...]`` -> events sorted by time; ``kinds`` are the ones the
    caller can inject. Raises ChaosError naming the part that is wrong."""
    events: list[ChaosEvent] = []
    for part in (spec or "").split(","):
        part = part.strip()
        if not part:
            continue
        kind, _, at = part.partition("@")
        if kind not in kinds:
            raise ChaosError(f"--chaos {part!r}: kind must be one of {', '.join(kinds)}")
        try:
            t = float(at)
        except ValueError:
            raise ChaosError(f"--chaos {part!r}: {at!r} is not a number of seconds") from None
        if not math.isfinite(t) or t < 0:
            raise ChaosError(f"--chaos {part!r}: the time must be a number of seconds >= 0")
        events.append(ChaosEvent(t, kind))
    return sorted(events)
