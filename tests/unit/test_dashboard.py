"""The Grafana dashboard the chart ships (helm/stream-autoscaler/dashboards/): a dashboard JSON
model Grafana imports, whose queries name only series the runner and the controller export and
only variables it defines. Its queries returning data against a real runner and controller is
tests/integration/k8s/test_controller_spark.py's job."""

from __future__ import annotations

import re

import pytest
from prometheus_client import generate_latest

from contracts import metric_names
from controller.kube.controller_metrics import ControllerMetrics
from tests import dashboard

DASH = dashboard.load()
GRAFANA_BUILTINS = {"__rate_interval", "__interval", "__range"}


def exported_series() -> set[str]:
    """Sample names Prometheus stores: the runner's contract and the controller's registry
    (every controller series is exported at 0 from the start)."""
    runner = {s for m in metric_names.ALL for s in m.series}
    text = generate_latest(ControllerMetrics().registry).decode()
    controller = {line.split("{")[0].split(" ")[0] for line in text.splitlines()
                  if line and not line.startswith("#")}
    return runner | controller


def test_is_a_grafana_dashboard_with_a_prometheus_datasource_variable() -> None:
    assert DASH["schemaVersion"] >= 36 and DASH["uid"] and DASH["title"]
    ds = dashboard.variables(DASH)["datasource"]
    assert (ds["type"], ds["query"]) == ("datasource", "prometheus")
    ids = [p["id"] for p in dashboard.panels(DASH)]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    for p in dashboard.panels(DASH):
        g = p["gridPos"]
        assert g["x"] + g["w"] <= 24 and g["h"] > 0, p["title"]
        if p["type"] == "row":
            continue
        assert p["type"] in ("timeseries", "stat"), p["title"]
        assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, p["title"]
        assert p["targets"] and p["description"], p["title"]
        refs = [t["refId"] for t in p["targets"]]
        assert len(refs) == len(set(refs)), p["title"]


@pytest.mark.parametrize("q", dashboard.queries(DASH), ids=lambda q: f"{q.panel}/{q.ref}")
def test_every_query_names_exported_series_and_defined_variables(q: dashboard.PanelQuery) -> None:
    names = set(re.findall(r"\b(stream_autoscaler_\w+)", q.expr))
    if q.expr.startswith("up{"):  # Prometheus' own scrape health of the targets
        names = {n for n in names if n != "up"}
    else:
        assert names, "a panel on the runner's or the controller's series"
    assert names <= exported_series(), f"not exported: {names - exported_series()}"
    used = set(re.findall(r"\$\{?(\w+)", q.expr))
    assert used <= set(dashboard.variables(DASH)) | GRAFANA_BUILTINS, used
    assert "vector(" not in q.expr, "a constant answers whatever is scraped"


def test_variables_list_label_values_of_exported_series() -> None:
    got = dashboard.label_value_queries(DASH)
    assert set(got) == {"job", "controller"}
    for metric, label in got.values():
        assert metric in exported_series() and label == "job"
    assert dashboard.variables(DASH)["slo"]["type"] == "textbox"


def test_render_refuses_an_unknown_variable() -> None:
    assert dashboard.render('up{job=~"$job"}[$__range]', {"job": "a", "__range": "5m"}) == (
        'up{job=~"a"}[5m]')
    with pytest.raises(AssertionError, match="unknown variables"):
        dashboard.render("rate(x[$__rate_interval]) / $slo", {"slo": "30"})
