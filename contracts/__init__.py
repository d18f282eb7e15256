"""The contracts between stream-autoscaler's two planes, declared once.

Both the control plane (:mod:`controller`) and the data plane (:mod:`operators`) import this
package; it imports neither (an import-linter contract, ``make lint``, enforces it). Here:

- :mod:`contracts.api`: the API group/version and the Kubernetes object envelope;
- :mod:`contracts.policy`, :mod:`contracts.streamjob`: the ScalingPolicy and StreamJob models;
- :mod:`contracts.manifests`: YAML -> models with errors a person can act on;
- :mod:`contracts.crds`: the CRDs and JSON Schemas generated from those models;
- :mod:`contracts.trace`: the burst trace format;
- :mod:`contracts.runner_api`: the runner's control endpoint (phases, actions, status);
- :mod:`contracts.metric_names`: every metric the runner exports;
- :mod:`contracts.ports`: the loopback ports both planes pick for the servers they start.

Standard library, pydantic and PyYAML only. See docs/architecture.md.
"""
