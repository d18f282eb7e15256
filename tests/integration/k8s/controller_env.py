"""The controller as the tests run it: a real `stream-autoscaler controller` process, under the
chart's ServiceAccount (a TokenRequest token, not admin), against the loopback test bed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests
import yaml

from contracts.ports import free_port
from tests.integration.k8s.k8s_tier import CHART, REPO, Tool

CONTROLLER_NS = "sa-ctl"
RELEASE = "stream-autoscaler"
SA_USER = f"system:serviceaccount:{CONTROLLER_NS}:{RELEASE}"

FAST_POLICY = {
    "apiVersion": "stream-autoscaler.io/v1alpha1",
    "kind": "ScalingPolicy",
    "metadata": {"name": "fast"},
    "spec": {
        "executors": {"min": 1, "max": 8},
        "partitions": {"min": 1, "max": 16, "repartition": True},
        "timing": {
            "evaluationIntervalSeconds": 2,
            "windowSeconds": 10,
            "staleAfterSeconds": 20,
            "cooldownSeconds": 4,
            "scaleDownStabilizationSeconds": 10,
        },
    },
}
"""A policy on a test's time scale: a decision every 2 s over a 10 s window."""


def wait_for(what: str, fn: Callable[[], Any], timeout: float = 60.0, every: float = 0.5) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = fn()
        except Exception as e:  # not there yet
            last = e
        if last and not isinstance(last, Exception):
            return last
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what} (last: {last!r})")


def install_chart(helm: Tool, kubectl: Tool, tmp: Path, env: dict[str, str]) -> Path:
    """Installs the chart (RBAC + ServiceAccount; no controller pod) and returns a kubeconfig
    holding that ServiceAccount's token."""
    helm("uninstall", RELEASE, "-n", CONTROLLER_NS, "--wait", check=False)
    helm("install", RELEASE, str(CHART), "-n", CONTROLLER_NS, "--create-namespace",
         "--set", "replicaCount=0", "--wait", "--timeout=2m")
    token = kubectl("create", "token", RELEASE, "-n", CONTROLLER_NS, "--duration=2h").stdout
    return token_kubeconfig(env, token, tmp / "controller.kubeconfig")


def token_kubeconfig(env: dict[str, str], token: str, path: Path) -> Path:
    """A kubeconfig that authenticates with ``token`` only (no client certificate)."""
    cfg = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "testbed", "cluster": {
            "server": env["TESTBED_APISERVER"], "certificate-authority": env["TESTBED_CA_FILE"]}}],
        "users": [{"name": "token", "user": {"token": token.strip()}}],
        "contexts": [{"name": "token", "context": {"cluster": "testbed", "user": "token"}}],
        "current-context": "token",
    }
    path.write_text(yaml.safe_dump(cfg))
    return path


@dataclass
class ControllerProc:
    """One `stream-autoscaler controller` process."""

    kubeconfig: Path
    namespace: str
    log_dir: Path
    identity: str = "ctl-a"
    leader_elect: bool = False
    extra: list[str] = field(default_factory=list)
    proc: subprocess.Popen[bytes] | None = None
    metrics_port: int = 0
    health_port: int = 0

    def start(self) -> ControllerProc:
        self.metrics_port, self.health_port = free_port(), free_port()
        argv = [sys.executable, "-m", "app.cli", "controller",
                "--namespace", self.namespace, "--bind", "127.0.0.1",
                "--health-port", str(self.health_port), "--metrics-port", str(self.metrics_port),
                "--attach-allow-host", "127.0.0.1",  # the tier's runners listen on loopback
                *self.extra]
        if self.leader_elect:
            argv += ["--leader-elect", "--lease-namespace", CONTROLLER_NS,
                     "--identity", self.identity]
        env = {**os.environ, "KUBECONFIG": str(self.kubeconfig), "PYTHONPATH": str(REPO),
               "STREAM_AUTOSCALER_LOG_LEVEL": "info"}
        self.log_dir.mkdir(parents=True, exist_ok=True)
        # the child keeps its own descriptor of the log: ours is closed once it has started
        with open(self.log_dir / f"controller-{self.identity}.log", "ab") as log:
            self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env,
                                         cwd=REPO)
        wait_for("controller /healthz", self.healthy, timeout=60)
        return self

    def healthy(self) -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            raise AssertionError(f"controller exited {self.proc.returncode}: {self.log()[-2000:]}")
        try:
            return requests.get(f"http://127.0.0.1:{self.health_port}/healthz",
                                timeout=1).status_code == 200
        except requests.RequestException:
            return False

    def metric(self, name: str, **labels: str) -> float:
        text = requests.get(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5).text
        from prometheus_client.parser import text_string_to_metric_families

        total = 0.0
        for fam in text_string_to_metric_families(text):
            for s in fam.samples:
                if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                    total += s.value
        return total

    def log(self) -> str:
        p = self.log_dir / f"controller-{self.identity}.log"
        return p.read_text(errors="replace") if p.exists() else ""

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=30)

    def stop(self) -> None:
        self.kill(signal.SIGTERM)


def attached_job(name: str, namespace: str, control_url: str, metrics_url: str,
                 secret: str = "runner-token", policy: str = "fast") -> dict[str, Any]:
    doc = yaml.safe_load((REPO / "k8s" / "samples" / "streamjob-burst.yaml").read_text())
    doc["metadata"] = {"name": name, "namespace": namespace}
    doc["spec"]["policyRef"] = {"name": policy}
    doc["spec"]["attach"] = {"controlUrl": control_url, "metricsUrl": metrics_url,
                             "tokenSecretRef": {"name": secret, "key": "token"}}
    return doc


def apply(kubectl: Tool, doc: dict[str, Any], namespace: str | None = None) -> None:
    args = ["apply", "-f", "-"] + (["-n", namespace] if namespace else [])
    kubectl(*args, input=json.dumps(doc))


def events(kubectl: Tool, namespace: str, name: str | None = None) -> list[dict[str, Any]]:
    items = kubectl.json("get", "events", "-n", namespace)["items"]
    return [e for e in items if name is None or e["involvedObject"].get("name") == name]


def status(kubectl: Tool, namespace: str, name: str) -> dict[str, Any]:
    return dict(kubectl.json("get", "sj", name, "-n", namespace).get("status") or {})
