"""The runner's exporter registers exactly the metrics of contracts.metric_names (name, type,
labels, help), and the scrape rules read the series it exposes. Needs pyspark (the exporter's
listener subclasses Spark's), not a JVM.

Run: ``.venv/bin/pytest tests/integration/metrics/test_exporter_contract.py``.
"""

from __future__ import annotations

from prometheus_client import generate_latest

from contracts import metric_names as M
from controller.adapters.scrape import PER_OPERATOR_RULES, PER_STATE_OPERATOR_RULES, SCALAR_RULES
from tests.realcomponents import require_module


def test_the_exporter_registers_the_contract() -> None:
    require_module("pyspark")
    from operators.driver.exporter import RunnerMetrics

    registry = RunnerMetrics("j", ["counts"]).registry
    registered = {f.name: f for f in registry.collect()}
    # prometheus_client reports a counter's family without its _total suffix
    declared = {m.full: m for m in M.ALL}
    assert set(registered) == set(declared)
    for name, m in declared.items():
        family = registered[name]
        assert (family.type, family.documentation) == (m.type, m.help), name
    text = generate_latest(registry).decode()  # a fresh runner: up and phase only
    assert f'{M.UP.full}{{job="j"}} 1.0' in text
    assert f'{M.PHASE.full}{{job="j",phase="Starting"}} 1.0' in text
    read = {s for rules in (SCALAR_RULES, PER_OPERATOR_RULES, PER_STATE_OPERATOR_RULES)
            for rule in rules.values() for s in rule.samples()}
    assert read <= {s for m in M.ALL for s in m.series}


def test_the_exporter_labels_each_metric_as_declared() -> None:
    require_module("pyspark")
    from operators.driver.exporter import RunnerMetrics

    metrics = RunnerMetrics("j", ["counts"])
    by_full = {m.full: m for m in M.ALL}
    checked = set()
    for attr in vars(metrics).values():
        name = getattr(attr, "_name", None)
        if name is None or (name not in by_full and name.removesuffix("_total") not in by_full):
            continue
        m = by_full.get(name) or by_full[name.removesuffix("_total")]
        assert tuple(attr._labelnames) == m.labels, m.name
        checked.add(m.full)
    # every declared metric was found and checked: a prometheus_client that renamed its private
    # attributes would fail here instead of passing with nothing checked
    assert checked == set(by_full), sorted(set(by_full) - checked)
