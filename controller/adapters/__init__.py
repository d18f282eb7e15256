"""Adapters the control plane's hosts share: how a job is measured and how it is told.

- :mod:`.prometheus` (+ :mod:`.promql`): a MetricsSnapshot from Prometheus;
- :mod:`.scrape`: the same snapshot from a runner's ``/metrics`` directly (no Prometheus);
- :mod:`.runner_client`: the runner's control endpoint.

Hosts (:mod:`controller.kube`, :mod:`controller.local`, :mod:`controller.simulator`) import
these; adapters import no host.
"""
