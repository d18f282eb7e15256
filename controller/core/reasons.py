"""The engine's reason codes, declared with the API types in :mod:`contracts.reasons` (the
history in status stores them typed); imported here under the names the core has always used."""

from __future__ import annotations

from contracts.reasons import RESTARTING_ACTIONS, Action, BottleneckKind, Reason

__all__ = ["RESTARTING_ACTIONS", "Action", "BottleneckKind", "Reason"]
