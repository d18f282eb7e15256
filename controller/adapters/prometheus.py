"""MetricsSnapshot from Prometheus, with prometheus-api-client.

Hostile answers are unknowns, never zeros: an empty result, NaN, +/-Inf, a negative value or
several series where one is expected all leave the field ``None``; an unreachable Prometheus
gives a snapshot with no data and ``unavailable`` saying why, so the engine holds and says so.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Protocol

import structlog

from controller.adapters.promql import PER_OPERATOR, PER_STATE_OPERATOR, SCALARS, Window
from controller.core.snapshot import MetricsSnapshot, StageMetrics
from controller.errors import ControllerError

log = structlog.get_logger(__name__)

QueryFn = Callable[[str], list[dict[str, Any]]]
"""Runs one instant PromQL query; returns the API's ``result`` list (vector)."""

INT_FIELDS = {
    "executors",
    "cores_per_executor",
    "target_executors",
    "source_partitions",
    "batches",
    "failed_tasks",
    "executors_lost",
    "last_committed_batch",
}
"""Snapshot fields that count things: the query's float is rounded."""


class SnapshotSource(Protocol):
    """Anything that can tell a job's metrics over a window."""

    def snapshot(self, job: str, window: Window, now: float) -> MetricsSnapshot: ...


class MetricsUnavailable(ControllerError):
    """The metrics backend could not be asked (connection refused, timeout, HTTP error)."""


def prometheus_query_fn(url: str, timeout_seconds: float = 5.0) -> QueryFn:
    """A QueryFn over prometheus-api-client against ``url``."""
    from prometheus_api_client import PrometheusConnect

    prom = PrometheusConnect(url=url, disable_ssl=True)

    def query(q: str) -> list[dict[str, Any]]:
        try:
            result = prom.custom_query(q, params={"timeout": f"{timeout_seconds:g}s"})
        except Exception as e:  # requests errors, PrometheusApiClientException
            raise MetricsUnavailable(f"Prometheus at {url}: {type(e).__name__}: {e}") from e
        return list(result or [])

    return query


class PrometheusSource:
    """Builds snapshots by running the queries of :mod:`controller.adapters.promql`."""

    def __init__(self, url: str | None = None, query: QueryFn | None = None) -> None:
        if query is None:
            if url is None:
                raise ValueError("PrometheusSource needs a url or a query function")
            query = prometheus_query_fn(url)
        self.url = url
        self._query = query

    def snapshot(self, job: str, window: Window, now: float) -> MetricsSnapshot:
        try:
            scalars = {f: _one(self._query(window.render(q, job)), f) for f, q in SCALARS.items()}
            per_op = {f: _by(self._query(window.render(q, job))) for f, q in PER_OPERATOR.items()}
            per_state = {
                f: _by(self._query(window.render(q, job))) for f, q in PER_STATE_OPERATOR.items()
            }
        except MetricsUnavailable as e:
            log.warning("metrics_unavailable", job=job, error=str(e))
            return MetricsSnapshot(job=job, unavailable=str(e))
        return assemble_snapshot(job, window, now, scalars, per_op, per_state)


def assemble_snapshot(
    job: str,
    window: Window,
    now: float,
    scalars: dict[str, float | None],
    per_op: dict[str, dict[tuple[str, str], float]],
    per_state: dict[str, dict[tuple[str, str], float]],
) -> MetricsSnapshot:
    """The MetricsSnapshot of one evaluation from its query results, however they were had
    (Prometheus here, a direct scrape in :mod:`.scrape`): ``scalars`` by snapshot field (with
    ``driver_up``), ``per_op``/``per_state`` by field then ``(operator, kind or "")``. Counts
    are rounded to integers; with no value at all the snapshot has no data and says so."""
    fields: dict[str, Any] = {
        k: (round(v) if k in INT_FIELDS and v is not None else v)
        for k, v in scalars.items()
        if k != "driver_up"
    }
    driver_up = scalars.get("driver_up")
    anything = any(v is not None for v in fields.values()) or driver_up is not None
    return MetricsSnapshot(
        job=job,
        observed_at=now if anything else None,
        window_seconds=window.window_seconds,
        driver_up=None if driver_up is None else driver_up >= 1,
        stages=_stages(per_op, per_state),
        unavailable=None if anything else "Prometheus has no series for this job",
        **fields,
    )


def _value(sample: dict[str, Any]) -> float | None:
    try:
        v = float(sample["value"][1])
    except (KeyError, IndexError, TypeError, ValueError):
        return None
    return v if math.isfinite(v) and v >= 0 else None


def _one(result: list[dict[str, Any]], name: str) -> float | None:
    if not result:
        return None
    if len(result) > 1:
        log.warning("ambiguous_series", field=name, series=len(result))
        return None
    return _value(result[0])


def _by(result: list[dict[str, Any]]) -> dict[tuple[str, str], float]:
    out: dict[tuple[str, str], float] = {}
    for sample in result:
        labels = sample.get("metric") or {}
        op = labels.get("operator")
        v = _value(sample)
        if op is None or v is None:
            continue
        out[(op, labels.get("kind", ""))] = v
    return out


def _stages(
    per_op: dict[str, dict[tuple[str, str], float]],
    per_state: dict[str, dict[tuple[str, str], float]],
) -> tuple[StageMetrics, ...]:
    keys = sorted({k for values in per_op.values() for k in values})
    state_ops = {op for values in per_state.values() for (op, _) in values}
    stages: list[StageMetrics] = []
    seen: set[str] = set()
    for op, kind in keys:
        row: dict[str, Any] = {f: per_op[f].get((op, kind)) for f in per_op}
        if row.get("partitions") is not None:
            row["partitions"] = max(1, round(row["partitions"]))
        stage_kind = kind if kind in ("source", "stateless", "stateful", "sink") else "stateless"
        if op in state_ops:
            stage_kind = "stateful"
            row.update(_state_fields(per_state, op))
        stages.append(StageMetrics(name=op, kind=stage_kind, **row))
        seen.add(op)
    for op in sorted(state_ops - seen):
        stages.append(StageMetrics(name=op, kind="stateful", **_state_fields(per_state, op)))
    return tuple(stages)


def _state_fields(per_state: dict[str, dict[tuple[str, str], float]], op: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f, values in per_state.items():
        v = values.get((op, ""))
        if f == "state_partitions":
            if v is not None:
                out["partitions"] = max(1, round(v))
        else:
            out[f] = v
    return out
