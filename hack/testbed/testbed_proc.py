"""Processes of the test bed: start detached with a log file, recognise our own, stop them.

A process is "ours" only while /proc/<pid>/cmdline still equals the argv we started it with, so a
recycled pid is never signalled. Standard library only: up.sh runs this with any python3.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any


def cmdline(pid: int) -> list[str] | None:
    """The argv of a live, non-zombie process, or None."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        if stat.rsplit(")", 1)[1].split()[0] in ("Z", "X"):
            return None
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (FileNotFoundError, ProcessLookupError, IndexError, PermissionError):
        return None
    return [a.decode() for a in raw.split(b"\0")[:-1]]


def is_ours(pid: int | None, argv: Sequence[str]) -> bool:
    """Whether ``pid`` is alive and still runs exactly ``argv``."""
    return bool(pid) and cmdline(pid) == list(argv)  # type: ignore[arg-type]


_DETACHED: list[subprocess.Popen[bytes]] = []
"""The processes :func:`start` launched, held for this interpreter's life: a Popen collected
while its child runs warns (ResourceWarning, an error under the suite's filterwarnings), and
these children outlive their Popen by design (:func:`stop` reaps them by PID)."""


def start(argv: Sequence[str], log: Path, env: dict[str, str] | None = None) -> int:
    """Start ``argv`` in its own session (it outlives the caller), output appended to ``log``."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        out.write(f"\n=== {time.strftime('%Y-%m-%dT%H:%M:%S')} {' '.join(argv)}\n".encode())
        out.flush()
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, **(env or {})},
        )
    _DETACHED.append(proc)
    return proc.pid


def stop(pid: int | None, argv: Sequence[str], timeout: float = 15.0) -> bool:
    """SIGTERM the process if it is ours, SIGKILL after ``timeout``. True if it was running."""
    if not pid or not is_ours(pid, argv):
        return False
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        _reap(pid)
        if cmdline(pid) is None:
            return True
        time.sleep(0.1)
    os.kill(pid, signal.SIGKILL)
    _reap(pid)
    return True


def _reap(pid: int) -> None:
    """Collect the exit status if the process is our child (else it is init's to reap)."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nobody listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def port_free(port: int) -> bool:
    """Whether a server could listen on the port now. SO_REUSEADDR as Go's listeners set it, so
    connections in TIME_WAIT from a killed predecessor do not count as taken."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def http_get(
    url: str,
    *,
    token: str | None = None,
    cafile: Path | None = None,
    timeout: float = 2.0,
) -> tuple[int, bytes]:
    """GET ``url``; (status, body), or (0, b"") when nothing answers. ``cafile=None`` on https
    skips verification (the controller-manager's and scheduler's self-signed serving certs)."""
    ctx = None
    if url.startswith("https"):
        ctx = ssl.create_default_context(cafile=str(cafile)) if cafile else _insecure()
    req = urllib.request.Request(url)
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=timeout, context=ctx) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()
    except (urllib.error.URLError, OSError):
        return 0, b""


def http_json(
    method: str, url: str, body: dict[str, object] | None, *, token: str, cafile: Path
) -> tuple[int, Any]:
    """Send JSON to the API server; (status, decoded body)."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method)
    req.add_header("Authorization", f"Bearer {token}")
    req.add_header("Content-Type", "application/json")
    ctx = ssl.create_default_context(cafile=str(cafile))
    try:
        with urllib.request.urlopen(req, timeout=10, context=ctx) as resp:
            return resp.status, json.loads(resp.read() or b"{}")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def _insecure() -> ssl.SSLContext:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


PROGRESS_EVERY_SECONDS = 15.0
"""How often a long wait for a component says it is still waiting."""


def wait_until(
    what: str,
    check: Callable[[], bool],
    timeout: float,
    log: Path | None = None,
    alive: Callable[[], bool] | None = None,
) -> None:
    """Poll ``check`` until true; on timeout or death raise with the log's tail. A wait longer
    than :data:`PROGRESS_EVERY_SECONDS` says every so often what it waits for (not silence)."""
    start = time.monotonic()
    deadline = start + timeout
    told = start
    while True:
        if check():
            return
        if time.monotonic() - told >= PROGRESS_EVERY_SECONDS:
            told = time.monotonic()
            print(f"testbed: still waiting for {what} ({told - start:.0f} s of {timeout:.0f} s)",
                  flush=True)  # fmt: skip
        dead = alive is not None and not alive()
        if dead or time.monotonic() > deadline:
            tail = ""
            if log and log.exists():
                tail = "\n".join(log.read_text(errors="replace").splitlines()[-25:])
            state = "exited" if dead else f"not ready after {timeout:.0f} s"
            raise TimeoutError(f"{what} {state}; last lines of {log}:\n{tail}")
        time.sleep(0.2)


def read_versions(path: Path) -> dict[str, str]:
    """``KEY=value`` lines of a versions.env file (``#`` comments and blank lines ignored)."""
    out = {}
    for line in path.read_text().splitlines():
        if "=" in line and not line.lstrip().startswith("#"):
            k, v = line.split("=", 1)
            out[k.strip()] = v.strip()
    return out


def cache_root() -> Path:
    """Where built tools and resolved jars are cached, outside the work tree."""
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "stream-autoscaler"
