"""The control plane: the pure decision core and the hosts that run it.

- :mod:`controller.core`: pure logic (capacity, diagnosis, engine, history, the evaluate step);
- :mod:`controller.adapters`: Prometheus / direct scrape -> MetricsSnapshot, the runner client;
- hosts, which never import each other: :mod:`controller.kube` (the Kubernetes controller),
  :mod:`controller.local` (the embedded loop), :mod:`controller.simulator` (the what-if model).

It imports :mod:`contracts`, never :mod:`operators` (the data plane). See docs/architecture.md.
"""

__version__ = "0.1.0"
