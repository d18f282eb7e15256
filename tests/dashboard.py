"""The Grafana dashboard the chart ships (``helm/stream-autoscaler/dashboards/``), read the way
Grafana reads it, and its queries run against a Prometheus.

Usage (a test with a Prometheus that scrapes a runner and the controller)::

    values = variable_values(prom_url, start, end)   # what each variable's label_values() lists
    failures = evaluate(prom_url, {"job": "wordcount", "controller": "ctl", **values}, start, end)
    assert not failures, "\\n".join(failures)
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import requests

from tests.realcomponents import REPO

DASHBOARD = REPO / "helm" / "stream-autoscaler" / "dashboards" / "stream-autoscaler.json"
LABEL_VALUES = re.compile(r"^label_values\((\w+),\s*(\w+)\)$")


@dataclass(frozen=True)
class PanelQuery:
    """One target of one panel."""

    panel: str
    ref: str
    expr: str
    instant: bool


def load() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    return doc


def _panels(panels: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for p in panels:
        yield p
        yield from _panels(p.get("panels", []))  # a collapsed row holds its panels


def panels(dash: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every panel, rows included, in order."""
    return list(_panels(list(dash["panels"])))


def queries(dash: Mapping[str, Any]) -> list[PanelQuery]:
    """Every PromQL target of every panel."""
    return [PanelQuery(p["title"], t["refId"], t["expr"], bool(t.get("instant")))
            for p in panels(dash) for t in p.get("targets", [])]


def variables(dash: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    return {v["name"]: v for v in dash["templating"]["list"]}


def label_value_queries(dash: Mapping[str, Any]) -> dict[str, tuple[str, str]]:
    """Query variables as ``name -> (metric, label)`` of their ``label_values(metric, label)``."""
    out = {}
    for name, v in variables(dash).items():
        if v["type"] == "query":
            query = v["query"] if isinstance(v["query"], str) else v["query"]["query"]
            m = LABEL_VALUES.match(query)
            assert m, f"variable {name}: not label_values(metric, label): {v['query']}"
            out[name] = (m.group(1), m.group(2))
    return out


def render(expr: str, values: Mapping[str, str]) -> str:
    """``expr`` with ``$name`` / ``${name}`` replaced (longest names first, as ``$job`` must not
    eat ``$jobs``); an unknown variable left over is an error."""
    for name in sorted(values, key=len, reverse=True):
        expr = expr.replace("${" + name + "}", values[name]).replace("$" + name, values[name])
    left = re.findall(r"\$\{?\w+", expr)
    assert not left, f"unknown variables {left} in {expr}"
    return expr


def variable_values(url: str, start: float, end: float) -> dict[str, list[str]]:
    """What each query variable would list over ``[start, end]`` (Grafana's label_values)."""
    out = {}
    for name, (metric, label) in label_value_queries(load()).items():
        r = requests.get(f"{url}/api/v1/label/{label}/values", timeout=10,
                         params={"match[]": metric, "start": start, "end": end})
        r.raise_for_status()
        out[name] = list(r.json()["data"])
    return out


def grafana_builtins(start: float, end: float, step: float, rate_interval: float) -> dict[str, str]:
    """Grafana's interval variables for a range ``[start, end]`` drawn every ``step`` s;
    ``rate_interval`` is what Grafana computes as max(4 x scrape interval, step + scrape)."""
    return {"__rate_interval": f"{round(rate_interval)}s", "__interval": f"{round(step)}s",
            "__range": f"{round(end - start)}s"}


def _finite(result: list[dict[str, Any]]) -> bool:
    samples = [s for r in result for s in (r.get("values") or [r.get("value")]) if s]
    return any(math.isfinite(float(v)) for _, v in samples)


def evaluate(url: str, values: Mapping[str, str], start: float, end: float,
             step: float = 5.0) -> list[str]:
    """Runs every panel's every target as Grafana would (a range query, or an instant one at
    ``end``) and names each that errors, returns no series, or only NaN/Inf samples."""
    failures = []
    for q in queries(load()):
        expr = render(q.expr, values)
        if q.instant:
            r = requests.get(f"{url}/api/v1/query", params={"query": expr, "time": end},
                             timeout=30)
        else:
            r = requests.get(f"{url}/api/v1/query_range", timeout=30,
                             params={"query": expr, "start": start, "end": end, "step": step})
        body = r.json()
        where = f"panel {q.panel!r} target {q.ref} ({expr})"
        if body.get("status") != "success":
            failures.append(f"{where}: {body.get('errorType')}: {body.get('error')}")
        elif not body["data"]["result"]:
            failures.append(f"{where}: no series")
        elif not _finite(body["data"]["result"]):
            failures.append(f"{where}: only NaN/Inf samples")
    return failures
