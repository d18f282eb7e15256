"""Every timeout, interval and limit of the Kubernetes controller, declared once.

Usage::

    settings = ControllerSettings(namespace="jobs", prometheus_url="http://prometheus:9090")

Each field says why its default is what it is. The decision thresholds themselves live in the
ScalingPolicy (``contracts.policy``); these are the controller's own mechanics.
"""

from __future__ import annotations

import json
import os
import socket
from dataclasses import dataclass, field
from typing import Any

from contracts.api import API_GROUP, API_VERSION
from contracts.runner_api import CONTROL_PORT, METRICS_PORT
from controller.kube.informer import InformerSettings
from controller.kube.workqueue import QueueSettings

GROUP = API_GROUP
VERSION = API_VERSION
JOBS = "streamjobs"
POLICIES = "scalingpolicies"
FINALIZER = "stream-autoscaler.io/stop-at-batch-boundary"
"""Held on every StreamJob until its query has stopped between batches."""
MANAGER = "stream-autoscaler"
"""The component name in Events and the field manager of our writes."""


def _identity() -> str:
    return os.environ.get("POD_NAME") or f"{socket.gethostname()}-{os.getpid()}"


@dataclass(frozen=True)
class LeaderSettings:
    """Leader election on a coordination.k8s.io Lease (the client-go defaults)."""

    enabled: bool = False
    lease_name: str = "stream-autoscaler-controller"
    lease_namespace: str = field(
        default_factory=lambda: os.environ.get("POD_NAMESPACE") or "default"
    )
    identity: str = field(default_factory=_identity)
    lease_duration_seconds: int = 15
    """A standby takes over at most this long after the leader stopped renewing."""
    renew_deadline_seconds: int = 10
    """The leader gives up (and exits) if it cannot renew for this long: it must stop acting
    before a standby can take over."""
    retry_period_seconds: int = 2
    """How often candidates try to acquire, and the leader renews."""


@dataclass(frozen=True)
class ManagedSettings:
    """How the controller runs a job's driver pod (managed mode)."""

    image: str = field(
        default_factory=lambda: os.environ.get("STREAM_AUTOSCALER_IMAGE", "stream-autoscaler:dev")
    )
    """The same image as the controller (see the Dockerfile; the chart sets it)."""
    image_pull_policy: str = field(
        default_factory=lambda: os.environ.get("STREAM_AUTOSCALER_IMAGE_PULL_POLICY",
                                               "IfNotPresent")
    )
    """Of the driver and executor pods (``Never`` where images are loaded, not pulled)."""
    node_selector: dict[str, str] = field(
        default_factory=lambda: _json_env("STREAM_AUTOSCALER_POD_NODE_SELECTOR", {})
    )
    """Where driver and executor pods run (the chart's ``sparkPods.nodeSelector``)."""
    tolerations: list[dict[str, str]] = field(
        default_factory=lambda: _json_env("STREAM_AUTOSCALER_POD_TOLERATIONS", [])
    )
    """Taints the driver and executor pods tolerate (the chart's ``sparkPods.tolerations``)."""
    driver_cpu: str = field(
        default_factory=lambda: os.environ.get("STREAM_AUTOSCALER_DRIVER_CPU", "1")
    )
    """The driver pod's CPU request: it plans batches and runs the runner (Python + JVM)."""
    driver_memory: str = field(
        default_factory=lambda: os.environ.get("STREAM_AUTOSCALER_DRIVER_MEMORY", "1Gi")
    )
    controller_namespace: str | None = field(
        default_factory=lambda: os.environ.get("POD_NAMESPACE") or None
    )
    """The controller's own namespace (the chart's downward API): no managed job runs there, so
    no driver running a job author's code sits beside the controller's ServiceAccount
    (``tests/unit/kube/test_reconcile_failure.py::test_no_driver_in_the_controllers_namespace``)."""
    spark_service_account: str = "stream-autoscaler-spark"
    """The drivers' ServiceAccount (the chart's sparkDriver.serviceAccountName): it creates the
    executor pods."""
    control_port: int = CONTROL_PORT
    metrics_port: int = METRICS_PORT
    driver_port: int = 7078
    block_manager_port: int = 7079
    ui_port: int = 4040


def _json_env(name: str, default: Any) -> Any:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        return json.loads(raw)
    except ValueError as e:
        raise ValueError(f"{name} is not JSON: {e}") from None


@dataclass(frozen=True)
class ControllerSettings:
    """The controller's mechanics."""

    namespace: str | None = None
    """Watch this namespace only; None = all namespaces."""
    attach_allowed_hosts: tuple[str, ...] = field(
        default_factory=lambda: tuple(
            h.strip() for h in os.environ.get(
                "STREAM_AUTOSCALER_ATTACH_ALLOWED_HOSTS", ".svc,.svc.cluster.local"
            ).split(",") if h.strip()
        )
    )
    """Host suffixes an attached job's controlUrl/metricsUrl may name (controller/kube/attach.py):
    in-cluster Services by default, so a job author cannot make the controller call (and send
    a token to) any address it can reach."""
    prometheus_url: str | None = None
    """Query runners' metrics here; None = scrape each runner's /metrics directly."""
    workers: int = 4
    """Reconcile threads. A reconcile waits mostly on HTTP (runner, Prometheus, API server)."""
    default_interval_seconds: float = 10.0
    """Re-check period of a job whose policy gives none (missing or invalid policy)."""
    action_poll_seconds: float = 2.0
    """Re-check period while an action is in flight: its end shows within this."""
    intent_timeout_seconds: float = 300.0
    """An intent older than this whose runner does not know it is abandoned (rolled back in
    status, an Event says so) instead of being retried: the job may have changed since."""
    stop_timeout_seconds: float = 120.0
    """How long deletion waits for a stop at a batch boundary before releasing the finalizer
    anyway (the runner is gone or wedged; an Event says the stop was not confirmed)."""
    health_port: int = field(
        default_factory=lambda: int(os.environ.get("STREAM_AUTOSCALER_HEALTH_PORT", "8080"))
    )
    metrics_port: int = field(
        default_factory=lambda: int(os.environ.get("STREAM_AUTOSCALER_METRICS_PORT", "9090"))
    )
    bind: str = "0.0.0.0"
    """Health and metrics listen here (probes come from the kubelet); tests use 127.0.0.1."""
    leader: LeaderSettings = field(default_factory=LeaderSettings)
    managed: ManagedSettings = field(default_factory=ManagedSettings)
    queue: QueueSettings = field(default_factory=QueueSettings)
    informer: InformerSettings = field(default_factory=InformerSettings)
