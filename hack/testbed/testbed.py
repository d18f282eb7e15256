#!/usr/bin/env python3
"""The loopback test bed: etcd, kube-apiserver (RBAC on), kube-controller-manager,
kube-scheduler and kwok with fake nodes, started from the binaries `hack/tools/build.sh` caches;
`up` also starts the Kafka broker of hack/testbed/testbed_kafka.py (TESTBED_KAFKA in env), and,
as root with containerd and the CNI plugins installed, one real node (hack/testbed/testbed_node.py:
containerd, kubelet, kube-proxy, CoreDNS on a bridge of its own; TESTBED_NODE in env).

    python3 hack/testbed/testbed.py up | down | status     (what `make testbed[-down]` run)

    sys.path.insert(0, "hack/testbed"); import testbed
    bed = testbed.ensure_up(user=os.getpid())  # reuse healthy components, (re)start the rest
    bed.env["KUBECONFIG"]; bed.env["TESTBED_APISERVER"]; bed.admin_token
    testbed.release(os.getpid())   # the last user stops a test bed that `make testbed` did not pin
    testbed.down()                 # stops only the processes it started (pids in state.json)

Everything lives in .testbed/ (override with TESTBED_DIR): state.json (ports, pids, argv),
pki/, kubeconfig (admin), kubeconfigs/, etcd-data/, logs/<component>.log, env, bin/ (links to
the cached tools). Standard library only.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import testbed_node
from testbed_pki import SERVICE_CIDR, Pki
from testbed_proc import (
    cache_root,
    cmdline,
    free_port,
    http_get,
    http_json,
    is_ours,
    port_free,
    read_versions,
    start,
    stop,
    wait_until,
)

REPO = Path(__file__).resolve().parents[2]
VERSIONS_FILE = REPO / "hack" / "tools" / "versions.env"
NODES = ("kwok-node-0", "kwok-node-1")
TOOLS = {  # tool -> key in versions.env
    "etcd": "ETCD_VERSION",
    "kube-apiserver": "KUBERNETES_VERSION",
    "kube-controller-manager": "KUBERNETES_VERSION",
    "kube-scheduler": "KUBERNETES_VERSION",
    "kubectl": "KUBERNETES_VERSION",
    "helm": "HELM_VERSION",
    "kwok": "KWOK_VERSION",
}
NODE_TOOLS = {  # the real node's tools: optional (without them the node is skipped)
    "kubelet": "KUBERNETES_VERSION",
    "kube-proxy": "KUBERNETES_VERSION",
    "coredns": "COREDNS_VERSION",
    "crictl": "CRICTL_VERSION",
    "pause": "PAUSE_VERSION",
}
ORDER = ("etcd", "apiserver", "controller-manager", "scheduler", "kwok")
CONTROL_PLANE = ORDER  # the real node's components are testbed_node.COMPONENTS


class ToolsMissing(RuntimeError):
    """The cached binaries are not there: run `make tools` (hack/tools/build.sh)."""


def versions() -> dict[str, str]:
    return read_versions(VERSIONS_FILE)


def tools_dir() -> Path:
    return Path(os.environ.get("SA_TOOLS_BIN", cache_root() / "bin"))


def tool_paths() -> dict[str, Path]:
    """Cached binary of every tool (and kwok's stage file); raise ToolsMissing if any is absent."""
    v, d = versions(), tools_dir()
    paths = {t: d / f"{t}-{v[k]}" for t, k in TOOLS.items()}
    paths["kwok-stages"] = d / f"kwok-stages-{v['KWOK_VERSION']}.yaml"
    missing = [str(p) for p in paths.values() if not p.exists()]
    if missing:
        raise ToolsMissing("test-bed tools not built (run `make tools`): " + ", ".join(missing))
    for t, k in NODE_TOOLS.items():
        if k in v and (d / f"{t}-{v[k]}").exists():
            paths[t] = d / f"{t}-{v[k]}"
    return paths


@dataclass
class Testbed:
    """What a running test bed offers its users."""

    dir: Path
    kubeconfig: Path
    admin_token: str
    ca_file: Path
    env: dict[str, str] = field(default_factory=dict)
    tools: dict[str, Path] = field(default_factory=dict)
    started: list[str] = field(default_factory=list)  # components this call (re)started


class _Bed:
    """One `up`: the state file, the credentials, and how each component starts and is probed."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.state_file = root / "state.json"
        self.state: dict[str, Any] = {}
        if self.state_file.exists():
            self.state = json.loads(self.state_file.read_text())
        self.fresh = not self.state
        self.tools = tool_paths()
        # The real node, when this machine can run one (else why not, for the env and the tier).
        self.node_missing = testbed_node.missing(self.tools, root)
        self.node: testbed_node.Node | None = None
        self.pki = Pki(root / "pki")
        self.init_node()

    def init_node(self) -> None:
        """(Re)bind the node to the current state; the certificate then names its gateway."""
        if self.node_missing is None:
            self.node = testbed_node.Node(
                self.root, self.state.setdefault("node", {}), self.tools, self.port
            )
        self.pki = Pki(self.root / "pki", (self.node.gateway,) if self.node else ())

    def save(self) -> None:
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.state, indent=2))
        tmp.replace(self.state_file)

    def port(self, name: str, key: str = "port") -> int:
        """The component's recorded port, or a new free one."""
        entry = self.state.setdefault(name, {})
        ports = entry.setdefault("ports", {})
        assert isinstance(ports, dict)
        return int(ports.setdefault(key, free_port()))

    def log(self, name: str) -> Path:
        return self.root / "logs" / f"{name}.log"

    # --- component command lines ---------------------------------------------------------

    def argv(self, name: str) -> list[str]:
        t, r, p = self.tools, self.root, self.pki
        api = f"https://127.0.0.1:{self.port('apiserver')}"
        if name == "etcd":
            client, peer = self.port("etcd"), self.port("etcd", "peer")
            return [
                str(t["etcd"]),
                "--name=testbed",
                f"--data-dir={r / 'etcd-data'}",
                f"--listen-client-urls=http://127.0.0.1:{client}",
                f"--advertise-client-urls=http://127.0.0.1:{client}",
                f"--listen-peer-urls=http://127.0.0.1:{peer}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
                f"--initial-cluster=testbed=http://127.0.0.1:{peer}",
                "--unsafe-no-fsync",
                "--log-level=warn",
                "--quota-backend-bytes=4294967296",
            ]
        if name == "apiserver":
            node = self.node
            return [
                str(t["kube-apiserver"]),
                f"--etcd-servers=http://127.0.0.1:{self.port('etcd')}",
                "--bind-address=127.0.0.1",
                f"--advertise-address={node.gateway if node else '127.0.0.1'}",
                f"--secure-port={self.port('apiserver')}",
                f"--tls-cert-file={p.server_crt}",
                f"--tls-private-key-file={p.server_key}",
                f"--client-ca-file={p.ca_crt}",
                f"--token-auth-file={p.tokens_csv}",
                "--authorization-mode=Node,RBAC",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-account-key-file={p.sa_pub}",
                f"--service-account-signing-key-file={p.sa_key}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                # With a real node, the `kubernetes` Service points at the gateway forwarder
                # (pods use it). Without, its endpoint would be a loopback address, which the
                # API server itself rejects; nothing then needs it.
                f"--endpoint-reconciler-type={'lease' if node else 'none'}",
                *(
                    [
                        f"--kubelet-client-certificate={p.kubelet_client_crt}",
                        f"--kubelet-client-key={p.kubelet_client_key}",
                        "--kubelet-preferred-address-types=InternalIP",
                    ]
                    if node
                    else []
                ),
                "--allow-privileged=true",
                "--v=1",
            ]
        kc = r / "kubeconfigs" / f"{name}.kubeconfig"
        if name == "controller-manager":
            return [
                str(t["kube-controller-manager"]),
                f"--kubeconfig={kc}",
                f"--master={api}",
                f"--authentication-kubeconfig={kc}",
                f"--authorization-kubeconfig={kc}",
                "--authentication-skip-lookup",
                "--bind-address=127.0.0.1",
                f"--secure-port={self.port(name)}",
                "--leader-elect=false",
                "--use-service-account-credentials=true",
                f"--service-account-private-key-file={p.sa_key}",
                f"--root-ca-file={p.ca_crt}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                "--v=1",
            ]
        if name == "scheduler":
            return [
                str(t["kube-scheduler"]),
                f"--kubeconfig={kc}",
                f"--master={api}",
                f"--authentication-kubeconfig={kc}",
                f"--authorization-kubeconfig={kc}",
                "--authentication-skip-lookup",
                "--bind-address=127.0.0.1",
                f"--secure-port={self.port(name)}",
                "--leader-elect=false",
                "--v=1",
            ]
        if name == "kwok":
            return [
                str(t["kwok"]),
                f"--kubeconfig={kc}",
                f"--master={api}",
                f"--config={t['kwok-stages']}",
                "--manage-all-nodes=false",
                "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
                f"--server-address=127.0.0.1:{self.port('kwok')}",
                "--node-ip=127.0.0.1",
                "--cidr=10.244.0.0/16",
                "--node-lease-duration-seconds=40",
            ]
        if self.node and name in testbed_node.COMPONENTS:
            return self.node.argv(name)
        raise KeyError(name)

    def healthy(self, name: str) -> bool:
        if self.node and name in testbed_node.COMPONENTS:
            return self.node.healthy(name)
        port = self.port(name)
        if name == "etcd":
            code, body = http_get(f"http://127.0.0.1:{port}/health")
            return code == 200 and b'"true"' in body
        if name == "apiserver":
            code, _ = http_get(
                f"https://127.0.0.1:{port}/readyz", token=self.admin_token, cafile=self.pki.ca_crt
            )
            return code == 200
        if name == "kwok":
            return http_get(f"http://127.0.0.1:{port}/healthz")[0] == 200
        return http_get(f"https://127.0.0.1:{port}/healthz")[0] == 200

    @property
    def admin_token(self) -> str:
        return self.pki.token("admin")

    @property
    def api(self) -> str:
        return f"https://127.0.0.1:{self.port('apiserver')}"

    # --- lifecycle -----------------------------------------------------------------------

    def ensure(self, name: str, timeout: float) -> bool:
        """Reuse the component if ours, same argv, healthy; else restart it. True if started."""
        entry = self.state.setdefault(name, {})
        argv = self.argv(name)
        pid = entry.get("pid")
        assert pid is None or isinstance(pid, int)
        binary = Path(argv[0]).stat().st_mtime_ns  # a rebuilt tool restarts its component
        if is_ours(pid, argv) and entry.get("binary") == binary and self.healthy(name):
            return False
        old_argv = entry.get("argv")
        if pid and isinstance(old_argv, list):
            stop(pid, old_argv)
        ports = dict(entry.get("ports", {}))
        # A killed predecessor may still be closing its sockets: give it a moment, then move
        # whatever is still taken (by someone else) to a new port.
        deadline = time.monotonic() + 5
        while not all(map(port_free, ports.values())) and time.monotonic() < deadline:
            time.sleep(0.1)
        for key, port in ports.items():
            if not port_free(int(port)):
                entry["ports"][key] = free_port()
                argv = self.argv(name)
        t0 = time.monotonic()
        new_pid = start(argv, self.log(name))
        entry.update(pid=new_pid, argv=argv, binary=binary)
        self.save()
        wait_until(
            name,
            lambda: self.healthy(name),
            timeout,
            self.log(name),
            # Dead means gone (or a zombie), not "cmdline differs": right after the start the
            # kernel may still show the launcher's argv, and that race failed a start (kwok).
            alive=lambda: cmdline(new_pid) is not None,
        )
        print(
            f"testbed: started {name} (pid {new_pid}) in {time.monotonic() - t0:.1f} s", flush=True
        )
        return True

    def kube(
        self, method: str, path: str, body: dict[str, object] | None = None
    ) -> tuple[int, Any]:
        return http_json(
            method, self.api + path, body, token=self.admin_token, cafile=self.pki.ca_crt
        )

    def ensure_nodes(self) -> None:
        for node in NODES:
            code, body = self.kube("POST", "/api/v1/nodes", _fake_node(node))
            if code not in (201, 409):
                raise RuntimeError(f"creating node {node}: {code} {body}")

        def ready() -> bool:
            code, body = self.kube("GET", "/api/v1/nodes?labelSelector=type%3Dkwok")
            items = body.get("items", []) if code == 200 else []
            ok = {
                n["metadata"]["name"]
                for n in items
                if any(
                    c["type"] == "Ready" and c["status"] == "True"
                    for c in n.get("status", {}).get("conditions", [])
                )
            }
            return ok >= set(NODES)

        wait_until("kwok nodes Ready", ready, 60, self.log("kwok"))

    def ensure_default_serviceaccount(self) -> None:
        """Pods are admitted only once the controller-manager made the namespace's SA."""
        wait_until(
            "ServiceAccount default/default",
            lambda: (
                self.kube("GET", "/api/v1/namespaces/default/serviceaccounts/default")[0] == 200
            ),
            60,
            self.log("controller-manager"),
        )


def _fake_node(name: str) -> dict[str, object]:
    capacity = {"cpu": "32", "memory": "256Gi", "pods": "110", "ephemeral-storage": "1Ti"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {
                "type": "kwok",
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/role": "agent",
            },
        },
        "status": {"allocatable": capacity, "capacity": capacity},
    }


def _root(root: Path | None) -> Path:
    return (root or Path(os.environ.get("TESTBED_DIR", REPO / ".testbed"))).resolve()


@contextlib.contextmanager
def _locked(root: Path) -> Iterator[None]:
    """One `up` or `down` at a time per test bed (make testbed and pytest may race)."""
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def ensure_up(
    root: Path | None = None,
    log: Callable[[str], None] = print,
    *,
    user: int | None = None,
    pin: bool = False,
) -> Testbed:
    """Bring every component up (reusing healthy ones) and return how to reach them.

    ``user`` (a pid, e.g. a pytest session's) registers a user that must :func:`release` it;
    ``pin`` (what `make testbed` does) keeps it running until an explicit :func:`down`.
    """
    root = _root(root)
    with _locked(root):
        bed = _ensure_up(root, log)
        session = _session(root)
        session["pinned"] = bool(session.get("pinned")) or pin
        if user is not None:
            session["users"] = sorted({*_live(session.get("users", [])), user})
        _save_session(root, session)
        return bed


def release(user: int, root: Path | None = None, log: Callable[[str], None] = print) -> bool:
    """Drop ``user``; stop the test bed if nobody else uses it and it is not pinned.
    True if it was stopped. Concurrent pytest sessions thus never pull it from under another."""
    root = _root(root)
    if not (root / "state.json").exists():
        return False
    with _locked(root):
        session = _session(root)
        users = [u for u in _live(session.get("users", [])) if u != user]
        session["users"] = users
        _save_session(root, session)
        if users or session.get("pinned"):
            return False
        _down(root, False, log)
        return True


def _session(root: Path) -> dict[str, Any]:
    path = root / "session.json"
    return dict(json.loads(path.read_text())) if path.exists() else {}


def _save_session(root: Path, session: dict[str, Any]) -> None:
    (root / "session.json").write_text(json.dumps(session))


def _live(pids: Any) -> list[int]:
    return [p for p in pids if isinstance(p, int) and cmdline(p) is not None]


def _ensure_up(root: Path, log: Callable[[str], None]) -> Testbed:
    t0 = time.monotonic()
    bed = _Bed(root)
    if bed.state.get("versions") != versions():  # other binaries: start from a clean slate
        if not bed.fresh:
            log("testbed: tool versions changed; restarting from empty data")
            _stop_all(bed, log)
            _wipe(root / "etcd-data")
        bed.state = {"versions": dict(versions())}
        bed.init_node()
    bed.pki.ensure()
    started = []
    timeouts = {"etcd": 30, "apiserver": 90, "controller-manager": 60, "scheduler": 60, "kwok": 60}
    node = bed.node
    if node:
        node.ensure_network(log)  # the gateway address must exist before the API server
    else:
        log(f"testbed: no real node: {bed.node_missing}")
        if bed.state.get("node"):  # a node from an earlier run that cannot run now
            _down_node(bed, log)
    for name in CONTROL_PLANE:
        if name in CONTROL_PLANE[2:]:  # clients of the API server; its port is settled by now
            bed.pki.kubeconfig(root / "kubeconfigs" / f"{name}.kubeconfig", bed.api, name)
        if bed.ensure(name, timeouts[name]):
            started.append(name)
        if name == "apiserver" and node and bed.ensure("apiserver-proxy", 10):
            started.append("apiserver-proxy")
    bed.ensure_nodes()
    bed.ensure_default_serviceaccount()
    if node:
        started += _ensure_node(bed, node, log)
    kubeconfig = bed.pki.kubeconfig(root / "kubeconfig", bed.api, "admin")
    bindir = root / "bin"
    bindir.mkdir(exist_ok=True)
    for tool in ("kubectl", "helm", "kwok", "etcd", "kube-apiserver", "crictl"):
        if tool not in bed.tools:
            continue
        link = bindir / tool
        link.unlink(missing_ok=True)
        link.symlink_to(bed.tools[tool])
    env = {
        "KUBECONFIG": str(kubeconfig),
        "TESTBED_DIR": str(root),
        "TESTBED_BIN": str(bindir),
        "TESTBED_APISERVER": bed.api,
        "TESTBED_ETCD": f"http://127.0.0.1:{bed.port('etcd')}",
        "TESTBED_CONTROLLER_MANAGER": f"https://127.0.0.1:{bed.port('controller-manager')}",
        "TESTBED_SCHEDULER": f"https://127.0.0.1:{bed.port('scheduler')}",
        "TESTBED_KWOK": f"http://127.0.0.1:{bed.port('kwok')}",
        "TESTBED_CA_FILE": str(bed.pki.ca_crt),
        "TESTBED_KUBERNETES_VERSION": versions()["KUBERNETES_VERSION"],
    }
    if node:
        env.update(node.env())
    else:
        env["TESTBED_NODE_MISSING"] = bed.node_missing or ""
    env.update(_kafka_env(root))
    (root / "env").write_text("".join(f"{k}={v}\n" for k, v in env.items()))
    bed.save()
    log(
        f"testbed: up in {time.monotonic() - t0:.1f} s "
        f"({'started ' + ', '.join(started) if started else 'all reused'}); "
        f"KUBECONFIG={kubeconfig}"
    )
    return Testbed(root, kubeconfig, bed.admin_token, bed.pki.ca_crt, env, bed.tools, started)


def _ensure_node(bed: _Bed, node: testbed_node.Node, log: Callable[[str], None]) -> list[str]:
    """containerd (+ the pause image), CoreDNS, kubelet (until the Node is Ready), kube-proxy."""
    t0 = time.monotonic()
    started = []
    node.write_configs(bed.pki, bed.api)
    if bed.ensure("containerd", 60):
        started.append("containerd")
    node.ensure_pause_image(log)
    for path, obj in testbed_node.COREDNS_RBAC:
        code, body = bed.kube("POST", path, obj)
        if code not in (201, 409):
            raise RuntimeError(f"creating {obj['kind']} testbed:coredns: {code} {body}")
    for name, timeout in (("coredns", 60), ("kubelet", 90), ("kube-proxy", 60)):
        if bed.ensure(name, timeout):
            started.append(name)
        if name == "kubelet":
            log(f"testbed: waiting for node {testbed_node.NODE_NAME} to be Ready ...")
            testbed_node.wait_node_ready(bed.kube, 120, bed.log("kubelet"))
    bed.save()
    if started:
        log(f"testbed: real node {testbed_node.NODE_NAME} ready in {testbed_node.elapsed(t0)}")
    return started


def _down_node(bed: _Bed, log: Callable[[str], None]) -> list[str]:
    """Stop the node's processes (pods removed through CRI first) and undo what it made."""
    state = bed.state.get("node")
    if not state:
        return []
    stopped = []
    for name in ("kube-proxy", "kubelet"):
        if _stop_one(bed, name):
            stopped.append(name)
    node = testbed_node.Node(bed.root, state, _node_tools(), bed.port)
    if is_ours(
        bed.state.get("containerd", {}).get("pid"),
        bed.state.get("containerd", {}).get("argv") or [],
    ):
        node.remove_pods(log)
    for name in ("coredns", "containerd", "apiserver-proxy"):
        if _stop_one(bed, name):
            stopped.append(name)
    node.cleanup(log)
    bed.state.pop("node", None)
    return stopped


def _node_tools() -> dict[str, Path]:
    v, d = versions(), tools_dir()
    return {
        t: d / f"{t}-{v[k]}"
        for t, k in NODE_TOOLS.items()
        if k in v and (d / f"{t}-{v[k]}").exists()
    }


def _stop_one(bed: _Bed, name: str) -> bool:
    entry = bed.state.get(name, {})
    pid, argv = entry.get("pid"), entry.get("argv")
    entry.pop("pid", None)
    return isinstance(pid, int) and isinstance(argv, list) and stop(pid, argv)


def _kafka_env(root: Path) -> dict[str, str]:
    """TESTBED_KAFKA when the test bed's Kafka broker (hack/testbed/testbed_kafka.py) runs."""
    import testbed_kafka

    addr = testbed_kafka.running(root / "kafka")
    return {"TESTBED_KAFKA": addr} if addr else {}


def _up_kafka(root: Path) -> None:
    """`make testbed` also starts the Kafka broker (pinned) when its jars are resolved."""
    import testbed_kafka

    try:
        testbed_kafka.ensure_up(root / "kafka", pin=True)
    except testbed_kafka.KafkaMissing as e:
        print(f"testbed: kafka skipped: {e}", file=sys.stderr)


def _stop_all(bed: _Bed, log: Callable[[str], None] = print) -> list[str]:
    stopped = _down_node(bed, log)
    for name in reversed(CONTROL_PLANE):
        if _stop_one(bed, name):
            stopped.append(name)
    return stopped


def _wipe(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


def down(root: Path | None = None, wipe: bool = False, log: Callable[[str], None] = print) -> None:
    """Stop the processes this test bed started (and only those). ``wipe`` also drops the data."""
    root = _root(root)
    if not (root / "state.json").exists():
        log("testbed: nothing to stop")
        return
    with _locked(root):
        _down(root, wipe, log)


def _down(root: Path, wipe: bool, log: Callable[[str], None]) -> None:
    (root / "session.json").unlink(missing_ok=True)  # unpinned, no users
    bed = _Bed.__new__(_Bed)
    bed.root, bed.state_file = root, root / "state.json"
    bed.state = json.loads(bed.state_file.read_text())
    stopped = _stop_all(bed, log)
    bed.save()
    if wipe:
        _wipe(root / "etcd-data")
    log(f"testbed: stopped {', '.join(stopped) if stopped else 'nothing (none running)'}")


def status(root: Path | None = None) -> int:
    root = _root(root)
    state = json.loads((root / "state.json").read_text()) if (root / "state.json").exists() else {}
    running = expected = 0
    for name in (*ORDER, *(testbed_node.COMPONENTS if state.get("node") else ())):
        expected += 1
        entry = state.get(name, {})
        pid, argv = entry.get("pid"), entry.get("argv") or []
        ok = is_ours(pid, argv)
        running += ok
        print(f"{name:20} {'running pid ' + str(pid) if ok else 'stopped'}")
    return 0 if running == expected else 1


def main(argv: list[str]) -> int:
    cmd = argv[1] if len(argv) > 1 else "up"
    try:
        if cmd == "up":
            _up_kafka(_root(None))
            try:
                ensure_up(pin=True)
            except ToolsMissing:
                env = _root(None) / "env"  # the broker alone still gets its address there
                env.write_text("".join(f"{k}={v}\n" for k, v in _kafka_env(_root(None)).items()))
                raise
        elif cmd == "down":
            import testbed_kafka

            testbed_kafka.down(_root(None) / "kafka", wipe="--wipe" in argv)
            down(wipe="--wipe" in argv)
        elif cmd == "status":
            import testbed_kafka

            code = status()
            kafka = testbed_kafka.running(_root(None) / "kafka")
            print(f"{'kafka':20} {'running on ' + kafka if kafka else 'stopped'}")
            return code
        else:
            print(__doc__)
            return 2
    except ToolsMissing as e:
        print(f"testbed: {e}", file=sys.stderr)
        return 3
    except (TimeoutError, RuntimeError) as e:
        print(f"testbed: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
