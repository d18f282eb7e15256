"""A real Prometheus server on loopback, scraping runners, for the demo and the tests.

The binary comes from Debian's ``prometheus`` package (``hack/setup-python.sh`` installs it) or
``$PROMETHEUS_BIN``. Data and config live in a directory we own; only the process we started is
ever stopped.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import yaml

from contracts.ports import free_port
from controller.errors import ControllerError

READY_TIMEOUT_SECONDS = 30.0
"""Prometheus replays its WAL on start; an empty data dir is ready in ~1 s."""
SCRAPE_INTERVAL_SECONDS = 2.0
"""Short enough that a 30 s evaluation window holds ~15 samples of every series."""


class PrometheusNotFound(ControllerError):
    """No prometheus binary: say how to get one."""


def find_binary() -> str:
    """``$PROMETHEUS_BIN``, else ``prometheus`` on PATH."""
    env = os.environ.get("PROMETHEUS_BIN")
    if env:
        return env
    found = shutil.which("prometheus")
    if found:
        return found
    raise PrometheusNotFound(
        "no prometheus binary: run `make setup` (installs Debian's prometheus package) or set "
        "PROMETHEUS_BIN"
    )


def _duration(seconds: float) -> str:
    """A Prometheus duration (integer units only)."""
    return f"{round(seconds * 1000)}ms"


class PrometheusServer:
    """One Prometheus process; ``targets`` maps a scrape job name to ``host:port``."""

    def __init__(
        self,
        workdir: Path,
        targets: dict[str, str],
        port: int | None = None,
        scrape_interval: float = SCRAPE_INTERVAL_SECONDS,
    ) -> None:
        self.workdir = Path(workdir)
        self.targets = dict(targets)
        self.port = port or free_port()
        self.scrape_interval = scrape_interval
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _write_config(self) -> Path:
        every = _duration(self.scrape_interval)
        cfg = {
            "global": {"scrape_interval": every, "evaluation_interval": every},
            "scrape_configs": [
                {
                    "job_name": job,
                    "honor_labels": True,
                    "scrape_interval": every,
                    "scrape_timeout": _duration(max(self.scrape_interval * 0.8, 0.5)),
                    "static_configs": [{"targets": [addr]}],
                }
                for job, addr in sorted(self.targets.items())
            ],
        }
        path = self.workdir / "prometheus.yml"
        path.write_text(yaml.safe_dump(cfg, sort_keys=False), encoding="utf-8")
        return path

    def start(self) -> PrometheusServer:
        """Starts the server and waits until it is ready."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        config = self._write_config()
        log = open(self.workdir / "prometheus.log", "ab")  # noqa: SIM115 - owned by the process
        self.proc = subprocess.Popen(
            [
                find_binary(),
                f"--config.file={config}",
                f"--storage.tsdb.path={self.workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--web.enable-lifecycle",
                "--storage.tsdb.retention.time=2h",
                "--log.level=warn",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        deadline = time.monotonic() + READY_TIMEOUT_SECONDS
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                tail = (self.workdir / "prometheus.log").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"prometheus exited with {self.proc.returncode}: {tail}")
            if self.ready():
                return self
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"prometheus not ready on {self.url} after {READY_TIMEOUT_SECONDS} s")

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=1) as r:
                return bool(r.status == 200)
        except OSError:
            return False

    def set_targets(self, targets: dict[str, str]) -> None:
        """Rewrites the scrape config and reloads it (no restart)."""
        self.targets = dict(targets)
        self._write_config()
        if self.proc is not None and self.proc.poll() is None:
            req = urllib.request.Request(f"{self.url}/-/reload", method="POST")
            with urllib.request.urlopen(req, timeout=5):
                pass

    def kill(self) -> None:
        """SIGKILL, as an outage would (chaos)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)

    def stop(self) -> None:
        """Stops the process we started (SIGTERM, then SIGKILL)."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)

    def __enter__(self) -> PrometheusServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
