"""Metrics adapters: turn what Prometheus (or a runner's /metrics) says into a MetricsSnapshot."""

from controller.metrics.prometheus import PrometheusSource, SnapshotSource

__all__ = ["PrometheusSource", "SnapshotSource"]
