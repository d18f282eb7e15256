"""Loopback ports that both planes hand to servers they start: picked where no ``bind(0)`` lands.

A port picked free and bound later by another process (a runner's metrics server after its
Spark session started, a Spark master's JVM seconds after its spawn) can be taken in between.
The kernel hands ``bind(0)`` and every outgoing connection a port from the ephemeral range
(``/proc/sys/net/ipv4/ip_local_port_range``, 32768-60999 by default), and Spark, Kafka and the
JVMs bind their own driver, block-manager and broker ports that way. A port picked below that
range is therefore never taken by an ephemeral bind in the meantime; only another picker can
take it, and one picked at random among the ~12,000 from :data:`PICK_LOW` up rarely collides (both
are checked free when picked). tests/unit/contracts/test_ports.py holds the range and the fallback.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

PICK_LOW = 20000
"""The lowest port picked: above the registered services this project and its tools run on
loopback (Spark 4040-4099, 7077, 8080-8081; Kafka 9092; Prometheus 9090; MinIO 9000)."""

EPHEMERAL_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
PICK_ATTEMPTS = 64
"""Random ports tried before falling back to one the kernel picks (a busy or odd range)."""


def ephemeral_low(path: Path = EPHEMERAL_RANGE_FILE) -> int:
    """The first port of the kernel's ephemeral range; 32768 (Linux's default) if unreadable."""
    try:
        return int(path.read_text(encoding="ascii").split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _bindable(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on ``host`` that nobody listens on now, below the ephemeral range if it can
    (so no ``bind(0)`` elsewhere takes it before its server binds); else one ``bind(0)`` gives."""
    high = ephemeral_low() - 1
    if high - PICK_LOW >= PICK_ATTEMPTS:
        rng = random.SystemRandom()
        for _ in range(PICK_ATTEMPTS):
            port = rng.randint(PICK_LOW, high)
            if _bindable(host, port):
                return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])
