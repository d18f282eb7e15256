"""The NetworkPolicy a managed job's driver pod gets, as a pure function of the job.

Ingress to the control and metrics ports only from the controller's pods (and Prometheus for
metrics), to Spark's RPC and block-manager ports only from the job's own executor pods, and to
the UI from no one. The peers come from the chart (environment variables, :class:`DriverIngress`).
See docs/security.md.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass

from controller.kube.resources import JOB_LABEL, Names, Obj, object_meta
from controller.kube.settings import ManagedSettings

CONTROL_FROM_ENV = "STREAM_AUTOSCALER_DRIVER_CONTROL_FROM"
METRICS_FROM_ENV = "STREAM_AUTOSCALER_DRIVER_METRICS_FROM"


@dataclass(frozen=True)
class DriverIngress:
    """Who may reach a driver's control and metrics ports (NetworkPolicyPeers).

    ``control_from``: the controller's pods (control and metrics: it scrapes runners directly
    when it has no Prometheus); ``metrics_from``: Prometheus (metrics only). The chart sets both
    (``networkPolicy.driverControlFrom`` / ``driverMetricsFrom``) as JSON in
    ``$STREAM_AUTOSCALER_DRIVER_CONTROL_FROM`` / ``$..._METRICS_FROM``. An empty list admits
    no one (a NetworkPolicy rule with no peers would admit everyone, so it is left out).
    """

    control_from: tuple[Obj, ...]
    metrics_from: tuple[Obj, ...]

    @staticmethod
    def defaults(controller_namespace: str) -> DriverIngress:
        return DriverIngress(
            control_from=({
                "namespaceSelector": {
                    "matchLabels": {"kubernetes.io/metadata.name": controller_namespace}
                },
                "podSelector": {"matchLabels": {
                    "app.kubernetes.io/name": "stream-autoscaler",
                    "app.kubernetes.io/component": "controller",
                }},
            },),
            metrics_from=({
                "namespaceSelector": {},
                "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}},
            },),
        )

    @staticmethod
    def from_environment(env: Mapping[str, str] | None = None) -> DriverIngress:
        """The peers from the environment; ValueError naming the variable if one is not a JSON
        list of objects."""
        env = os.environ if env is None else env
        d = DriverIngress.defaults(env.get("POD_NAMESPACE") or "stream-autoscaler-system")

        def peers(var: str, default: tuple[Obj, ...]) -> tuple[Obj, ...]:
            raw = env.get(var)
            if not raw:
                return default
            try:
                value = json.loads(raw)
            except json.JSONDecodeError as e:
                raise ValueError(f"${var}: not JSON ({e})") from None
            if not isinstance(value, list) or not all(isinstance(p, dict) for p in value):
                raise ValueError(f"${var}: must be a JSON list of NetworkPolicyPeer objects")
            return tuple(value)

        return DriverIngress(peers(CONTROL_FROM_ENV, d.control_from),
                             peers(METRICS_FROM_ENV, d.metrics_from))


def network_policy(obj: Obj, s: ManagedSettings, ingress: DriverIngress | None = None) -> Obj:
    """Ingress to the driver pod: control and metrics from the controller, metrics from
    Prometheus, Spark RPC and block manager from the job's own executors (labelled by
    :func:`owned_spark_conf`). Nothing else: not the UI (the runner reads it on localhost)."""
    ingress = ingress or DriverIngress.from_environment()
    names = Names.of(obj)

    def tcp(*ports: int) -> list[Obj]:
        return [{"protocol": "TCP", "port": p} for p in ports]

    rules: list[Obj] = []
    if ingress.control_from:
        rules.append({"from": list(ingress.control_from),
                      "ports": tcp(s.control_port, s.metrics_port)})
    if ingress.metrics_from:
        rules.append({"from": list(ingress.metrics_from), "ports": tcp(s.metrics_port)})
    rules.append({
        "from": [{"podSelector": {"matchLabels": {JOB_LABEL: names.job,
                                                  "spark-role": "executor"}}}],
        "ports": tcp(s.driver_port, s.block_manager_port),
    })
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": object_meta(obj, f"{names.job}-driver", "driver"),
        "spec": {
            "podSelector": {"matchLabels": {JOB_LABEL: names.job, "spark-role": "driver"}},
            "policyTypes": ["Ingress"],
            "ingress": rules,
        },
    }
