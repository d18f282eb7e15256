"""The errors of :mod:`controller`: what stops one evaluation, one action or one run.

Hierarchy::

    ControllerError                      every error below
    ├── MetricsUnavailable               Prometheus (or a runner's /metrics) did not answer
    ├── RunnerUnavailable                the runner's control endpoint did not answer
    ├── RunnerRefused                    it answered 4xx/5xx (status and body kept)
    ├── ApiConflict                      the API server refused a write at a stale resourceVersion
    ├── NotFound                         an object the job needs is not there
    ├── Degraded                         a job that cannot be evaluated as specified
    ├── PrometheusNotFound               no Prometheus binary for the local loop
    └── SimulatorInputError(ValueError)  a simulator model or policy that cannot be used
        ├── ModelError
        └── PolicyError

Errors in what a person wrote as a manifest, trace or --chaos spec are
:class:`contracts.errors.ContractError`; docs/architecture.md lists every package's base.
"""

from __future__ import annotations


class ControllerError(Exception):
    """Base of the control plane's errors."""


class SimulatorInputError(ControllerError, ValueError):
    """Input to the simulator (model file, policy) that cannot be used; the message says why."""
