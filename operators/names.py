"""Names the metrics give a plan's stateful operators: pure, shared by the exporter and the
application runner (no Spark, no import of either)."""

from __future__ import annotations

from typing import Any

STATE_OPERATOR_KINDS = {
    "stateStoreSave": "aggregate",
    "dedupe": "deduplicate",
    "dedupeWithinWatermark": "deduplicate",
    "symmetricHashJoin": "join",
    "flatMapGroupsWithState": "flatMapGroupsWithState",
    "applyInPandasWithState": "applyInPandasWithState",
    "transformWithStateExec": "transformWithState",
    "transformWithStateInPySparkExec": "transformWithState",
    "globalLimit": "limit",
    "sessionWindowStateStoreSaveExec": "sessionWindow",
}
"""Spark's ``StateOperatorProgress.operatorName`` → the operator kind the metrics name."""


def operator_names(state_operators: list[dict[str, Any]]) -> list[str]:
    """Names for a plan's stateful operators, from their progress (``operatorName``): the kind
    (``aggregate``, ``join``, ``deduplicate``, ...) and, when a kind repeats, ``#n`` in plan
    order (``aggregate#1``, ``aggregate#2``)."""
    kinds = [STATE_OPERATOR_KINDS.get(str(op.get("operatorName")), str(op.get("operatorName")
                                                                        or "stateful"))
             for op in state_operators]
    seen: dict[str, int] = {}
    names = []
    for kind in kinds:
        seen[kind] = seen.get(kind, 0) + 1
        names.append(f"{kind}#{seen[kind]}" if kinds.count(kind) > 1 else kind)
    return names
