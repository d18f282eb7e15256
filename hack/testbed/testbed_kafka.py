#!/usr/bin/env python3
"""The test bed's Kafka broker: one KRaft node (broker and controller in one JVM) on loopback,
from the Maven Central jars `hack/tools/kafka/resolve.sh` caches.

    python3 hack/testbed/testbed_kafka.py up | down | status

    sys.path.insert(0, "hack/testbed"); import testbed_kafka
    broker = testbed_kafka.ensure_up(user=os.getpid())   # reuse a healthy broker, else start
    broker.bootstrap                                      # "127.0.0.1:<port>"
    testbed_kafka.release(os.getpid())   # the last user stops a broker nobody pinned

It lives in .testbed/kafka/ (under TESTBED_DIR): state.json (ports, pid, argv), server.properties,
data/ (formatted once with kafka.tools.StorageTool), broker.log, env. It has its own lock, state
and users, so the Kafka tier needs neither Go nor the Kubernetes tools; `make testbed` starts it
beside the control plane (hack/testbed/testbed.py) and puts TESTBED_KAFKA in .testbed/env.
Standard library only.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from testbed_proc import (
    cache_root,
    cmdline,
    free_port,
    is_ours,
    port_free,
    read_versions,
    start,
    stop,
    wait_until,
)

REPO = Path(__file__).resolve().parents[2]
VERSIONS_FILE = REPO / "hack" / "tools" / "kafka" / "versions.env"
START_TIMEOUT_SECONDS = 90.0
"""The broker answers ~3 s after launch on an idle 2-core machine; a JVM start while Spark test
suites share the cores has taken 5x that."""
LOOPBACK = "127.0.0.1"
"""Where clients reach the test bed's broker. A broker for pods on the real node listens on the
node's gateway address instead (an address of this machine on the bridge the test bed made),
which host processes reach too: Kafka tells every client the one address it advertises."""
HEAP = "-Xmx512m"
"""Test topics hold at most a few hundred MB; the default 1 GB heap only competes with Spark."""


class KafkaMissing(RuntimeError):
    """The broker's jars are not cached: run `make tools` (hack/tools/kafka/resolve.sh)."""


def versions() -> dict[str, str]:
    return read_versions(VERSIONS_FILE)


def cache_dir() -> Path:
    return Path(os.environ.get("SA_KAFKA_CACHE", cache_root() / "kafka"))


def broker_jars() -> Path:
    """The directory of the broker's classpath; KafkaMissing if it was never resolved."""
    d = cache_dir() / f"broker-{versions()['KAFKA_VERSION']}"
    if not (d / ".stamp").exists():
        raise KafkaMissing(f"Kafka broker jars not resolved (run `make tools`): {d}")
    return d


def spark_kafka_jars() -> list[Path]:
    """The Spark Kafka connector's jars (for spark.jars); KafkaMissing if never resolved."""
    d = cache_dir() / f"spark-kafka-{versions()['SPARK_KAFKA_VERSION']}"
    if not (d / ".stamp").exists():
        raise KafkaMissing(f"Spark Kafka connector jars not resolved (run `make tools`): {d}")
    return sorted(d.glob("*.jar"))


def java() -> str:
    home = os.environ.get("JAVA_HOME")
    if home and Path(home, "bin", "java").exists():
        return str(Path(home, "bin", "java"))
    found = shutil.which("java")
    if not found:
        raise KafkaMissing("no Java (java on PATH or JAVA_HOME): the Kafka broker needs Java 17+")
    return found


@dataclass
class KafkaBroker:
    """What a running broker offers its users."""

    dir: Path
    bootstrap: str
    started: bool
    """Whether this call (re)started it."""

    @property
    def env(self) -> dict[str, str]:
        return {"TESTBED_KAFKA": self.bootstrap}


def _root(root: Path | None) -> Path:
    base = Path(os.environ.get("TESTBED_DIR", REPO / ".testbed"))
    return (root or base / "kafka").resolve()


@contextlib.contextmanager
def _locked(root: Path) -> Iterator[None]:
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _load(root: Path) -> dict[str, Any]:
    path = root / "state.json"
    return dict(json.loads(path.read_text())) if path.exists() else {}


def _save(root: Path, state: dict[str, Any]) -> None:
    tmp = root / "state.tmp"
    tmp.write_text(json.dumps(state, indent=2))
    tmp.replace(root / "state.json")


def _properties(root: Path, port: int, controller_port: int, host: str = LOOPBACK) -> str:
    """A single KRaft node. Replication factors of the internal topics are 1 (one broker);
    no rebalance delay, so a consumer group forms at once in tests. Clients connect to (and are
    told to use) ``host``; the controller listener stays on loopback."""
    return f"""\
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:{controller_port}
listeners=PLAINTEXT://{host}:{port},CONTROLLER://127.0.0.1:{controller_port}
advertised.listeners=PLAINTEXT://{host}:{port}
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs={root / "data"}
num.partitions=1
auto.create.topics.enable=true
offsets.topic.replication.factor=1
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=4
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
log.retention.hours=24
"""


def _argv(root: Path, jars: Path) -> list[str]:
    return [
        java(),
        "-Xms128m",
        HEAP,
        "-XX:+UseSerialGC",
        "-Djava.awt.headless=true",
        "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
        "-Dorg.slf4j.simpleLogger.log.kafka.server.KafkaRaftServer=info",
        "-cp",
        f"{jars}/*",
        "kafka.Kafka",
        str(root / "server.properties"),
    ]


def api_versions_ok(port: int, timeout: float = 2.0, host: str = LOOPBACK) -> bool:
    """A real Kafka request: ApiVersions v0 answered with error code 0 (the broker serves)."""
    client = b"testbed"
    body = struct.pack(">hhih", 18, 0, 7, len(client)) + client
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.sendall(struct.pack(">i", len(body)) + body)
            head = _recv(s, 4)
            (size,) = struct.unpack(">i", head)
            resp = _recv(s, min(size, 6))
    except OSError:
        return False
    if len(resp) < 6:
        return False
    correlation, error = struct.unpack(">ih", resp[:6])
    return correlation == 7 and error == 0


def _recv(s: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = s.recv(n - len(out))
        if not chunk:
            break
        out += chunk
    return out


def _format(root: Path, jars: Path) -> None:
    """kafka.tools.StorageTool format: a new cluster id, the metadata log in data/."""
    cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
    # "--cluster-id=ID", not "-t ID": one id in 64 starts with "-", which the tool's argument
    # parser then reads as an option ("expected one argument"; seen in CI, 9 Kafka tests)
    cmd = [java(), "-Xmx256m", "-cp", f"{jars}/*", "kafka.tools.StorageTool", "format",
           f"--cluster-id={cluster_id}", "-c", str(root / "server.properties")]  # fmt: skip
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if res.returncode != 0:
        raise RuntimeError(f"kafka StorageTool format failed ({res.returncode}):\n{res.stderr}")


def _ensure(root: Path, log: Callable[[str], None], host: str) -> KafkaBroker:
    jars = broker_jars()
    state = _load(root)
    version = versions()["KAFKA_VERSION"]
    port = int(state.get("port") or free_port())
    cport = int(state.get("controller_port") or free_port())
    pid, argv = state.get("pid"), state.get("argv") or []
    bootstrap = f"{host}:{port}"
    if (
        is_ours(pid, argv)
        and argv == _argv(root, jars)
        and state.get("version") == version
        and state.get("host", LOOPBACK) == host
        and api_versions_ok(port, host=host)
    ):
        return KafkaBroker(root, bootstrap, started=False)
    if isinstance(pid, int) and argv:
        stop(pid, argv)
    deadline = time.monotonic() + 5  # a killed predecessor may still hold its sockets
    while not (port_free(port) and port_free(cport)) and time.monotonic() < deadline:
        time.sleep(0.1)
    wipe = state.get("version") != version
    if not port_free(port) or not port_free(cport):  # taken by someone else: move
        port, cport, wipe = free_port(), free_port(), True
    if wipe:  # another broker version or other ports: start from an empty cluster
        shutil.rmtree(root / "data", ignore_errors=True)
    bootstrap = f"{host}:{port}"
    (root / "server.properties").write_text(_properties(root, port, cport, host))
    t0 = time.monotonic()
    if not (root / "data" / "meta.properties").exists():
        _format(root, jars)
    argv = _argv(root, jars)
    new_pid = start(argv, root / "broker.log")
    state.update(pid=new_pid, argv=argv, port=port, controller_port=cport, version=version,
                 host=host)
    _save(root, state)
    wait_until(
        "kafka broker",
        lambda: api_versions_ok(port, host=host),
        START_TIMEOUT_SECONDS,
        root / "broker.log",
        alive=lambda: cmdline(new_pid) is not None,
    )
    secs = time.monotonic() - t0
    state["start_seconds"] = round(secs, 2)
    _save(root, state)
    (root / "env").write_text(f"TESTBED_KAFKA={bootstrap}\n")
    log(f"testbed: started kafka {version} (pid {new_pid}) on {bootstrap} in {secs:.1f} s")
    return KafkaBroker(root, bootstrap, started=True)


def ensure_up(
    root: Path | None = None,
    log: Callable[[str], None] = print,
    *,
    user: int | None = None,
    pin: bool = False,
    host: str = LOOPBACK,
) -> KafkaBroker:
    """Start the broker unless a healthy one of ours runs; register ``user`` or ``pin`` it.
    ``host``: the address it listens on and advertises (a running broker on another address
    is restarted on this one)."""
    root = _root(root)
    with _locked(root):
        broker = _ensure(root, log, host)
        state = _load(root)
        state["pinned"] = bool(state.get("pinned")) or pin
        if user is not None:
            state["users"] = sorted({*_live(state.get("users", [])), user})
        _save(root, state)
        return broker


def release(user: int, root: Path | None = None, log: Callable[[str], None] = print) -> bool:
    """Drop ``user``; stop the broker if nobody else uses it and it is not pinned."""
    root = _root(root)
    if not (root / "state.json").exists():
        return False
    with _locked(root):
        state = _load(root)
        users = [u for u in _live(state.get("users", [])) if u != user]
        state["users"] = users
        _save(root, state)
        if users or state.get("pinned"):
            return False
        _down(root, state, log)
        return True


def _live(pids: Any) -> list[int]:
    return [p for p in pids if isinstance(p, int) and cmdline(p) is not None]


def _down(root: Path, state: dict[str, Any], log: Callable[[str], None]) -> None:
    pid, argv = state.get("pid"), state.get("argv")
    stopped = isinstance(pid, int) and isinstance(argv, list) and stop(pid, argv, timeout=30)
    state.pop("pid", None)
    state["pinned"], state["users"] = False, []
    _save(root, state)
    (root / "env").unlink(missing_ok=True)
    log(f"testbed: {'stopped kafka' if stopped else 'kafka was not running'}")


def down(root: Path | None = None, wipe: bool = False, log: Callable[[str], None] = print) -> None:
    """Stop the broker this test bed started (only it). ``wipe`` also drops its data."""
    root = _root(root)
    if not (root / "state.json").exists():
        return
    with _locked(root):
        _down(root, _load(root), log)
        if wipe:
            shutil.rmtree(root / "data", ignore_errors=True)


def running(root: Path | None = None) -> str | None:
    """The bootstrap address if our broker runs, else None."""
    state = _load(_root(root))
    if is_ours(state.get("pid"), state.get("argv") or []):
        return f"{state.get('host', LOOPBACK)}:{state['port']}"
    return None


def main(argv: list[str]) -> int:
    cmd = argv[1] if len(argv) > 1 else "up"
    try:
        if cmd == "up":
            print(ensure_up(pin=True).bootstrap)
        elif cmd == "down":
            down(wipe="--wipe" in argv)
        elif cmd == "status":
            addr = running()
            print(f"{'kafka':20} {'running on ' + addr if addr else 'stopped'}")
            return 0 if addr else 1
        else:
            print(__doc__)
            return 2
    except KafkaMissing as e:
        print(f"testbed: {e}", file=sys.stderr)
        return 3
    except (TimeoutError, RuntimeError) as e:
        print(f"testbed: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
