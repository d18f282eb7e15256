"""The test bed's real node: Debian's containerd and runc, kubelet and kube-proxy (built from the
same k8s.io/kubernetes module as the API server), CNI plugins from Debian on a bridge the test bed
creates, and CoreDNS answering the cluster domain only. Pods really run here, next to kwok's fake
nodes (the real node is tainted, so pods land on it only when they ask for it).

Network rule: every address lives on this machine. The pod network is a bridge this module
creates in a /24 nobody uses; a FORWARD chain of ours lets traffic between pods through and drops
anything routed from the bridge to any other interface or back; nothing is masqueraded to the
uplink. The API server (bound to 127.0.0.1) is reached from pods through a forwarder listening on
the bridge's gateway address (the address it advertises, so the `kubernetes` Service points at
it), and CoreDNS listens on that gateway address too.

Everything this module makes is recorded in state["node"] and undone by :func:`down`: pods (CRI),
mounts, cgroups, the bridge, the iptables rules, the sysctls kubelet or we changed.
Standard library only.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import ipaddress
import json
import os
import shutil
import socket
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from testbed_proc import cache_root, http_get

NODE_NAME = "testbed-node"
TAINT_KEY = "stream-autoscaler.io/real-node"
NODE_LABEL = "stream-autoscaler.io/real-node"
CLUSTER_DOMAIN = "cluster.local"
PAUSE_IMAGE = "registry.k8s.io/pause:{version}"
CNI_BIN = Path("/usr/lib/cni")
CNI_PLUGINS = ("bridge", "host-local", "loopback", "portmap")
HOST_BINARIES = (
    "containerd",
    "containerd-shim-runc-v2",
    "runc",
    "ctr",
    "iptables",
    "ip",
    "conntrack",
)
# Components of the node, in start order (testbed.py adds them after the control plane).
COMPONENTS = ("apiserver-proxy", "containerd", "coredns", "kubelet", "kube-proxy")
# Sysctls kubelet (setupKernelTunables), kube-proxy or we may change: restored by down().
SYSCTLS = (
    "net/ipv4/ip_forward",
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
    "net/ipv4/conf/all/route_localnet",
)
CHAIN = "SA-TESTBED-FWD"
TABLE = "mangle"


# One real node per machine (two kubelets would fight over the kubepods cgroups): the test bed
# that runs it claims it here; another test bed (a private one in a test) runs without.
CLAIM = Path("/run/stream-autoscaler/testbed-node.json")


def owner() -> Path | None:
    """The test bed whose real node runs on this machine, if any."""
    from testbed_proc import is_ours

    try:
        root = Path(json.loads(CLAIM.read_text())["root"])
        state = json.loads((root / "state.json").read_text())
    except (OSError, ValueError, KeyError):
        return None
    entry = state.get("containerd", {})
    running = is_ours(entry.get("pid"), entry.get("argv") or [])
    return root if state.get("node") and running else None


def claim(root: Path) -> None:
    CLAIM.parent.mkdir(parents=True, exist_ok=True)
    CLAIM.write_text(json.dumps({"root": str(root)}))


def release_claim(root: Path) -> None:
    with contextlib.suppress(OSError, ValueError, KeyError):
        if Path(json.loads(CLAIM.read_text())["root"]) == root:
            CLAIM.unlink()


def missing(tools: dict[str, Path], root: Path) -> str | None:
    """Why the real node cannot run here (None if it can)."""
    if os.environ.get("TESTBED_NODE", "1") in ("0", "false", "no"):
        return "disabled by TESTBED_NODE=0"
    if os.geteuid() != 0:
        return "the real node needs root (containerd, bridge, iptables)"
    other = owner()
    if other is not None and other != root:
        return f"the test bed in {other} runs this machine's real node"
    for name in ("kubelet", "kube-proxy", "coredns", "pause", "crictl"):
        if name not in tools:
            return f"{name} is not built (make tools)"
    absent = [b for b in HOST_BINARIES if not shutil.which(b)]
    absent += [f"{CNI_BIN}/{p}" for p in CNI_PLUGINS if not (CNI_BIN / p).exists()]
    if absent:
        return (
            f"missing {', '.join(absent)} (apt-get install containerd runc iptables iproute2 "
            "conntrack containernetworking-plugins)"
        )
    return None


def _run(
    *argv: object, check: bool = True, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(a) for a in argv], check=check, capture_output=True, text=True, timeout=timeout
    )


def _sysctl_path(key: str) -> Path:
    return Path("/proc/sys") / key


class Node:
    """Paths, addresses and command lines of the node; ``state`` is state.json's "node" entry."""

    def __init__(
        self, root: Path, state: dict[str, Any], tools: dict[str, Path], port: Callable[..., int]
    ) -> None:
        self.root = root
        self.dir = root / "node"
        self.state = state
        self.tools = tools
        self.port = port  # testbed's port allocator: port(component, key)
        ident = hashlib.sha256(str(root).encode()).hexdigest()[:6]
        self.bridge = state.setdefault("bridge", f"satb{ident}")
        # containerd's state and runc's root are on tmpfs like theirs always are; short paths.
        self.run_dir = Path(state.setdefault("run_dir", f"/run/sa-testbed-{ident}"))

    # --- addresses --------------------------------------------------------------------------

    @property
    def subnet(self) -> ipaddress.IPv4Network:
        if "subnet" not in self.state:
            self.state["subnet"] = str(_pick_subnet())
        return ipaddress.IPv4Network(self.state["subnet"])

    @property
    def gateway(self) -> str:
        return str(self.subnet.network_address + 1)

    @property
    def sock(self) -> Path:
        return self.dir / "containerd" / "containerd.sock"

    @property
    def pause_image(self) -> str:
        return PAUSE_IMAGE.format(version=self.tools["pause"].name.rsplit("-", 1)[1])

    # --- network: bridge, FORWARD chain, sysctls -----------------------------------------------

    def ensure_network(self, log: Callable[[str], None]) -> None:
        claim(self.root)
        saved = self.state.setdefault("sysctls", {})
        for key in SYSCTLS:  # the host's values before we (or kubelet) touched anything
            if key not in saved and _sysctl_path(key).exists():
                saved[key] = _sysctl_path(key).read_text().strip()
        if _run("ip", "link", "show", self.bridge, check=False).returncode != 0:
            _run("ip", "link", "add", self.bridge, "type", "bridge")
            log(f"testbed: created bridge {self.bridge} ({self.subnet}, gateway {self.gateway})")
        addrs = _run("ip", "-4", "-o", "addr", "show", "dev", self.bridge).stdout
        if f" {self.gateway}/" not in addrs:
            _run("ip", "addr", "add", f"{self.gateway}/{self.subnet.prefixlen}", "dev", self.bridge)
        _run("ip", "link", "set", self.bridge, "up")
        # What iptables held before the node ever ran: down() removes the KUBE-*/CNI-* chains
        # and rules that kubelet, kube-proxy and the CNI plugins add beyond it.
        self.state.setdefault("iptables_before", _iptables_snapshot())
        # Pod -> Service -> pod on this bridge is routed through the host (kube-proxy's DNAT).
        _sysctl_path("net/ipv4/ip_forward").write_text("1\n")
        self._ensure_chain()

    def _chain_rules(self) -> list[list[str]]:
        br = self.bridge
        return [
            ["-i", br, "-o", br, "-j", "RETURN"],  # pod to pod (and Services DNATed to pods)
            ["-i", br, "-j", "DROP"],  # never routed from the pod network to anywhere else
            ["-o", br, "-j", "DROP"],  # nor from anywhere else into it
        ]

    def _ensure_chain(self) -> None:
        """Our chain, jumped to first from mangle's FORWARD: mangle runs before filter, where
        kube-proxy prepends its own jumps, so nothing it adds can accept traffic before ours."""
        ipt = ["iptables", "-w", "-t", TABLE]
        if _run(*ipt, "-n", "-L", CHAIN, check=False).returncode != 0:
            _run(*ipt, "-N", CHAIN)
        _run(*ipt, "-F", CHAIN)
        for rule in self._chain_rules():
            _run(*ipt, "-A", CHAIN, *rule)
        jump = ["FORWARD", "-j", CHAIN]
        if _run(*ipt, "-C", *jump, check=False).returncode != 0:
            _run(*ipt, "-I", *jump)
        self.state["iptables"] = {"table": TABLE, "chain": CHAIN, "jumps": [jump]}

    # --- the pause image ------------------------------------------------------------------------

    def pause_archive(self) -> Path:
        """A docker-archive with the static pause binary, tagged as containerd's sandbox_image;
        cached by the binary's hash."""
        binary = self.tools["pause"].read_bytes()
        digest = hashlib.sha256(binary).hexdigest()[:12]
        out = cache_root() / "images" / f"pause-{digest}.tar"
        if out.exists():
            return out
        out.parent.mkdir(parents=True, exist_ok=True)
        layer = io.BytesIO()
        with tarfile.open(fileobj=layer, mode="w", format=tarfile.PAX_FORMAT) as t:
            info = tarfile.TarInfo("pause")
            info.size, info.mode, info.mtime = len(binary), 0o755, 0
            t.addfile(info, io.BytesIO(binary))
        layer_bytes = layer.getvalue()
        diff_id = "sha256:" + hashlib.sha256(layer_bytes).hexdigest()
        config = json.dumps(
            {
                "architecture": "amd64",
                "os": "linux",
                "config": {"Entrypoint": ["/pause"], "User": "65535:65535"},
                "rootfs": {"type": "layers", "diff_ids": [diff_id]},
                "history": [{"created_by": "stream-autoscaler hack/tools/pause"}],
            }
        ).encode()
        config_name = hashlib.sha256(config).hexdigest() + ".json"
        manifest = json.dumps(
            [{"Config": config_name, "RepoTags": [self.pause_image], "Layers": ["layer.tar"]}]
        ).encode()
        tmp = out.with_suffix(".tmp")
        with tarfile.open(tmp, "w") as t:
            for name, data in (
                (config_name, config),
                ("layer.tar", layer_bytes),
                ("manifest.json", manifest),
            ):
                info = tarfile.TarInfo(name)
                info.size, info.mtime = len(data), 0
                t.addfile(info, io.BytesIO(data))
        tmp.replace(out)
        return out

    def ensure_pause_image(self, log: Callable[[str], None]) -> None:
        ctr = ["ctr", "-a", str(self.sock), "-n", "k8s.io"]
        have = _run(*ctr, "images", "ls", "-q", f"name=={self.pause_image}").stdout.split()
        archive = self.pause_archive()
        if have and self.state.get("pause_archive") == archive.name:
            return
        _run(*ctr, "images", "import", archive)
        self.state["pause_archive"] = archive.name
        log(
            f"testbed: imported {self.pause_image} (static pause binary) into the node's containerd"
        )

    # --- configuration files ------------------------------------------------------------------

    def write_configs(self, pki: Any, api_local: str) -> None:
        d = self.dir
        for sub in (
            "containerd",
            "cni/net.d",
            "cni/ipam",
            "kubelet",
            "pod-logs",
            "kube-proxy",
            "coredns",
        ):
            (d / sub).mkdir(parents=True, exist_ok=True)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        _write(d / "containerd" / "config.toml", self._containerd_toml())
        _write(d / "cni" / "net.d" / "10-testbed.conflist", json.dumps(self._cni_conf(), indent=2))
        api_pods = f"https://{self.gateway}:{self.port('apiserver')}"
        # Host processes reach the API server on loopback; pods through the gateway forwarder.
        pki.kubeconfig(d / "kubelet" / "kubeconfig", api_local, "kubelet")
        pki.kubeconfig(d / "kube-proxy" / "kubeconfig", api_local, "kube-proxy")
        pki.kubeconfig(d / "coredns" / "kubeconfig", api_local, "coredns")
        _write(d / "kubelet" / "config.yaml", self._kubelet_yaml(pki))
        _write(d / "kubelet" / "resolv.conf", "")  # no host nameservers or search domains in pods
        _write(d / "kube-proxy" / "config.yaml", self._kube_proxy_yaml())
        _write(d / "coredns" / "Corefile", self._corefile())
        self.state["api_for_pods"] = api_pods

    def _containerd_toml(self) -> str:
        d, run = self.dir / "containerd", self.run_dir
        cri = 'plugins."io.containerd.grpc.v1.cri"'
        return f"""version = 2
root = "{d / "root"}"
state = "{run / "containerd"}"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs",
  "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = "{self.sock}"

[ttrpc]
  address = "{self.sock}.ttrpc"

[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = "{d / "opt"}"

[{cri}]
  sandbox_image = "{self.pause_image}"
  # This host denies a negative oom_score_adj even to root: without this every sandbox fails
  # with "can't get final child's PID from pipe: EOF".
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  max_container_log_line_size = 16384

[{cri}.containerd]
  snapshotter = "overlayfs"
  default_runtime_name = "runc"

[{cri}.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[{cri}.containerd.runtimes.runc.options]
  SystemdCgroup = false
  BinaryName = "{shutil.which("runc")}"
  Root = "{run / "runc"}"

[{cri}.cni]
  bin_dir = "{CNI_BIN}"
  conf_dir = "{self.dir / "cni" / "net.d"}"
  max_conf_num = 1
"""

    def _cni_conf(self) -> dict[str, Any]:
        hosts = list(self.subnet.hosts())
        return {
            "cniVersion": "0.4.0",
            "name": "testbed",
            "plugins": [
                {
                    "type": "bridge",
                    "bridge": self.bridge,
                    "isGateway": True,
                    "ipMasq": False,  # nothing is masqueraded from the pod network
                    "hairpinMode": True,
                    "ipam": {
                        "type": "host-local",
                        "dataDir": str(self.dir / "cni" / "ipam"),
                        "ranges": [
                            [
                                {
                                    "subnet": str(self.subnet),
                                    "gateway": self.gateway,
                                    "rangeStart": str(hosts[9]),
                                    "rangeEnd": str(hosts[-1]),
                                }
                            ]
                        ],
                        "routes": [{"dst": "0.0.0.0/0"}],
                    },
                },
                {"type": "portmap", "capabilities": {"portMappings": True}, "snat": False},
            ],
        }

    def _kubelet_yaml(self, pki: Any) -> str:
        d = self.dir
        return f"""apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: {self.gateway}
port: {self.port("kubelet")}
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: {self.port("kubelet", "healthz")}
authentication:
  anonymous: {{enabled: false}}
  webhook: {{enabled: true}}
  x509: {{clientCAFile: {pki.ca_crt}}}
authorization: {{mode: Webhook}}
containerRuntimeEndpoint: unix://{self.sock}
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
clusterDomain: {CLUSTER_DOMAIN}
clusterDNS: [{self.gateway}]
resolvConf: {d / "kubelet" / "resolv.conf"}
podLogsDir: {d / "pod-logs"}
staticPodPath: ""
maxPods: 30
registerWithTaints:
- {{key: {TAINT_KEY}, value: "true", effect: NoSchedule}}
# Disk on a shared build machine: never evict or garbage-collect the images we imported.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {{memory.available: 100Mi, nodefs.available: 1%, imagefs.available: 1%}}
serializeImagePulls: false
syncFrequency: 10s
fileCheckFrequency: 10s
nodeStatusUpdateFrequency: 10s
shutdownGracePeriod: 0s
"""

    def _kube_proxy_yaml(self) -> str:
        return f"""apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: {self.dir / "kube-proxy" / "kubeconfig"}
mode: iptables
clusterCIDR: {self.subnet}
hostnameOverride: {NODE_NAME}
bindAddress: {self.gateway}
healthzBindAddress: 127.0.0.1:{self.port("kube-proxy")}
metricsBindAddress: 127.0.0.1:{self.port("kube-proxy", "metrics")}
nodePortAddresses: ["{self.subnet}"]
iptables:
  localhostNodePorts: false
  masqueradeAll: false
# 0: leave the host's conntrack sysctls alone.
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
"""

    def _corefile(self) -> str:
        return f"""{CLUSTER_DOMAIN}:53 in-addr.arpa:53 ip6.arpa:53 {{
    bind {self.gateway}
    errors
    health 127.0.0.1:{self.port("coredns")}
    ready 127.0.0.1:{self.port("coredns", "ready")}
    kubernetes {CLUSTER_DOMAIN} in-addr.arpa ip6.arpa {{
        kubeconfig {self.dir / "coredns" / "kubeconfig"} testbed
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }}
    cache 5
    loadbalance
}}
"""

    # --- command lines and probes -------------------------------------------------------------

    def argv(self, name: str) -> list[str]:
        t, d = self.tools, self.dir
        if name == "apiserver-proxy":
            return [
                sys.executable,
                str(Path(__file__).with_name("tcp_forward.py")),
                f"{self.gateway}:{self.port('apiserver')}",
                f"127.0.0.1:{self.port('apiserver')}",
            ]
        if name == "containerd":
            return [
                shutil.which("containerd") or "containerd",
                f"--config={d / 'containerd' / 'config.toml'}",
            ]
        if name == "coredns":
            return [str(t["coredns"]), "-conf", str(d / "coredns" / "Corefile"), "-dns.port", "53"]
        if name == "kubelet":
            return [
                str(t["kubelet"]),
                f"--config={d / 'kubelet' / 'config.yaml'}",
                f"--kubeconfig={d / 'kubelet' / 'kubeconfig'}",
                f"--root-dir={d / 'kubelet' / 'root'}",
                f"--hostname-override={NODE_NAME}",
                f"--node-ip={self.gateway}",
                f"--node-labels={NODE_LABEL}=true",
                "--v=1",
            ]
        if name == "kube-proxy":
            return [str(t["kube-proxy"]), f"--config={d / 'kube-proxy' / 'config.yaml'}", "--v=1"]
        raise KeyError(name)

    def healthy(self, name: str) -> bool:
        if name == "apiserver-proxy":
            with (
                contextlib.suppress(OSError),
                socket.create_connection((self.gateway, self.port("apiserver")), timeout=1),
            ):
                return True
            return False
        if name == "containerd":
            return (
                self.sock.exists()
                and _run("ctr", "-a", self.sock, "version", check=False, timeout=10).returncode == 0
            )
        if name == "coredns":
            return http_get(f"http://127.0.0.1:{self.port('coredns', 'ready')}/ready")[0] == 200
        if name == "kubelet":
            return http_get(f"http://127.0.0.1:{self.port('kubelet', 'healthz')}/healthz")[0] == 200
        if name == "kube-proxy":
            return http_get(f"http://127.0.0.1:{self.port('kube-proxy')}/livez")[0] == 200
        raise KeyError(name)

    def env(self) -> dict[str, str]:
        return {
            "TESTBED_NODE": NODE_NAME,
            "TESTBED_NODE_IP": self.gateway,
            "TESTBED_NODE_TAINT": f"{TAINT_KEY}=true:NoSchedule",
            "TESTBED_POD_CIDR": str(self.subnet),
            "TESTBED_BRIDGE": self.bridge,
            "TESTBED_DNS": self.gateway,
            "TESTBED_CONTAINERD_SOCK": str(self.sock),
            "CONTAINER_RUNTIME_ENDPOINT": f"unix://{self.sock}",  # for crictl
        }

    # --- down ---------------------------------------------------------------------------------

    def remove_pods(self, log: Callable[[str], None]) -> None:
        """Stop and remove every pod through CRI, so CNI releases its addresses and netns."""
        if not self.sock.exists() or "crictl" not in self.tools:
            return
        crictl = [
            str(self.tools["crictl"]),
            f"--runtime-endpoint=unix://{self.sock}",
            "--timeout=30s",
        ]
        res = _run(*crictl, "rmp", "--all", "--force", check=False, timeout=180)
        if res.returncode == 0 and res.stdout.strip():
            log(f"testbed: removed {len(res.stdout.splitlines())} pod sandbox(es) from the node")
        elif res.returncode != 0:
            log(f"testbed: crictl rmp: {res.stderr.strip()[-300:]}")

    def cleanup(self, log: Callable[[str], None]) -> None:
        """After the processes stopped: kube-proxy's rules, mounts, cgroups, our chain, the bridge,
        sysctls. Idempotent."""
        if "kube-proxy" in self.tools:
            _run(self.tools["kube-proxy"], "--cleanup", check=False)
        self._kill_shims()
        n = _unmount_under((self.dir, self.run_dir))
        if n:
            log(f"testbed: unmounted {n} node mount(s)")
        _remove_kubepods_cgroups()
        ipt = self.state.get("iptables") or {}
        table = ["iptables", "-w", "-t", ipt.get("table", "filter")]
        for jump in ipt.get("jumps", []):
            while _run(*table, "-D", *jump, check=False).returncode == 0:
                pass
        if ipt.get("chain"):
            _run(*table, "-F", ipt["chain"], check=False)
            _run(*table, "-X", ipt["chain"], check=False)
        self.state.pop("iptables", None)
        n = _remove_added_iptables(self.state.pop("iptables_before", None))
        if n:
            log(f"testbed: removed {n} iptables chain(s)/rule(s) kubelet, kube-proxy or CNI added")
        if _run("ip", "link", "show", self.bridge, check=False).returncode == 0:
            _run("ip", "link", "del", self.bridge, check=False)
            log(f"testbed: deleted bridge {self.bridge}")
        for key, value in (self.state.pop("sysctls", None) or {}).items():
            with contextlib.suppress(OSError):
                if _sysctl_path(key).read_text().strip() != value:
                    _sysctl_path(key).write_text(value + "\n")
        shutil.rmtree(self.run_dir, ignore_errors=True)
        release_claim(self.root)

    def _kill_shims(self) -> None:
        """containerd's shims outlive it by design; ours have our socket as -address."""
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            with contextlib.suppress(OSError):
                argv = (proc / "cmdline").read_bytes().split(b"\0")
                if (
                    argv
                    and argv[0].endswith(b"containerd-shim-runc-v2")
                    and str(self.sock).encode() in argv
                ):
                    os.kill(int(proc.name), 9)


def _write(path: Path, text: str) -> None:
    if not path.exists() or path.read_text() != text:
        path.write_text(text)


OUR_CHAINS = ("KUBE-", "CNI-", CHAIN)


def _iptables_snapshot() -> dict[str, dict[str, list[str]]]:
    """{table: {"chains": [...], "rules": ["-A ...", ...]}} from iptables-save."""
    out: dict[str, dict[str, list[str]]] = {}
    table = ""
    for line in _run("iptables-save").stdout.splitlines():
        if line.startswith("*"):
            table = line[1:]
            out[table] = {"chains": [], "rules": []}
        elif line.startswith(":"):
            out[table]["chains"].append(line[1:].split()[0])
        elif line.startswith("-A "):
            out[table]["rules"].append(line)
    return out


def _remove_added_iptables(before: dict[str, dict[str, list[str]]] | None) -> int:
    """Delete the rules and chains that are ours (KUBE-*, CNI-*, our chain) and were not there
    before the node first started. The count."""
    if before is None:
        return 0
    import shlex

    count = 0
    for table, now in _iptables_snapshot().items():
        old = before.get(table, {"chains": [], "rules": []})
        for rule in reversed(now["rules"]):
            words = shlex.split(rule)
            chain, target = words[1], words[words.index("-j") + 1] if "-j" in words else ""
            mine = chain.startswith(OUR_CHAINS) or target.startswith(OUR_CHAINS)
            if mine and rule not in old["rules"]:
                _run("iptables", "-w", "-t", table, "-D", *words[1:], check=False)
                count += 1
        for chain in now["chains"]:
            if chain.startswith(OUR_CHAINS) and chain not in old["chains"]:
                _run("iptables", "-w", "-t", table, "-F", chain, check=False)
        for chain in now["chains"]:
            if chain.startswith(OUR_CHAINS) and chain not in old["chains"]:
                _run("iptables", "-w", "-t", table, "-X", chain, check=False)
                count += 1
    return count


def _pick_subnet() -> ipaddress.IPv4Network:
    """A /24 in 10.217.0.0/16 that no local address or route overlaps."""
    used = []
    for cmd in (["ip", "-4", "-o", "addr"], ["ip", "-4", "route", "show", "table", "all"]):
        for line in _run(*cmd).stdout.splitlines():
            for word in line.split():
                with contextlib.suppress(ValueError):
                    if "/" in word or word[0].isdigit():
                        used.append(ipaddress.IPv4Network(word, strict=False))
    for i in range(256):
        net = ipaddress.IPv4Network(f"10.217.{i}.0/24")
        if not any(net.overlaps(u) for u in used if u.prefixlen > 0):
            return net
    raise RuntimeError("no free /24 in 10.217.0.0/16 for the pod network")


def _unmount_under(dirs: tuple[Path, ...]) -> int:
    """Unmount everything mounted below ``dirs`` (deepest first); the count."""
    prefixes = tuple(str(d.resolve()) + "/" for d in dirs)
    count = 0
    for _ in range(3):
        points = []
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            point = line.split()[4].replace("\\040", " ")
            if point.startswith(prefixes):
                points.append(point)
        if not points:
            break
        for point in sorted(set(points), key=len, reverse=True):
            if subprocess.run(["umount", point], capture_output=True).returncode != 0:
                subprocess.run(["umount", "-l", point], capture_output=True)
            count += 1
    return count


def _remove_kubepods_cgroups() -> None:
    """kubelet's cgroup tree (cgroupfs driver, v1: one per controller), once empty."""
    base = Path("/sys/fs/cgroup")
    for ctrl in base.iterdir() if base.exists() else []:
        top = ctrl / "kubepods"
        if not top.is_dir():
            continue
        for path in sorted(
            (p for p in top.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True
        ):
            with contextlib.suppress(OSError):
                path.rmdir()
        with contextlib.suppress(OSError):
            top.rmdir()


def wait_node_ready(kube: Callable[..., tuple[int, Any]], timeout: float, log_file: Path) -> None:
    from testbed_proc import wait_until

    def ready() -> bool:
        code, body = kube("GET", f"/api/v1/nodes/{NODE_NAME}")
        conds = body.get("status", {}).get("conditions", []) if code == 200 else []
        return any(c["type"] == "Ready" and c["status"] == "True" for c in conds)

    wait_until(f"node {NODE_NAME} Ready", ready, timeout, log_file)


COREDNS_RBAC = [
    (
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": "testbed:coredns"},
            "rules": [
                {
                    "apiGroups": [""],
                    "resources": ["endpoints", "services", "pods", "namespaces"],
                    "verbs": ["list", "watch"],
                },
                {
                    "apiGroups": ["discovery.k8s.io"],
                    "resources": ["endpointslices"],
                    "verbs": ["list", "watch"],
                },
            ],
        },
    ),
    (
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "testbed:coredns"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "testbed:coredns",
            },
            "subjects": [
                {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "system:coredns"}
            ],
        },
    ),
]


def elapsed(t0: float) -> str:
    return f"{time.monotonic() - t0:.1f} s"
