"""Starting and stopping the demo's real processes: the runner (one Spark driver) and chaos.

Only processes this module started are ever signalled, by PID.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from controller.adapters.runner_client import RunnerClient

RUNNER_START_TIMEOUT_SECONDS = 180.0
"""Session start ~6 s, first batch ~9 s on 2 cores (docs/spark-facts.md); a cold JVM and a restored
RocksDB state take longer under load."""


@dataclass
class RunnerProcess:
    """One ``stream-autoscaler runner`` subprocess on fixed loopback ports."""

    job_file: Path
    master: str
    workdir: Path
    control_port: int
    metrics_port: int
    executors: int
    max_executors: int
    token_file: Path
    proc: subprocess.Popen[bytes] | None = None
    info: dict[str, Any] = field(default_factory=dict)
    starts: int = 0

    @property
    def client(self) -> RunnerClient:
        return RunnerClient(
            f"http://127.0.0.1:{self.control_port}",
            self.token_file.read_text(encoding="utf-8").strip(),
        )

    def start(self, executors: int | None = None, state_partitions: int | None = None,
              max_records_per_batch: int | None = None) -> dict[str, Any]:  # fmt: skip
        """Starts the runner and waits for its ready file; returns it. ``state_partitions``:
        resume at that many (``runner --state-partitions``, a recovery with more capacity);
        ``max_records_per_batch``: the recovery's admission cap (``runner
        --max-records-per-batch``)."""
        if executors is not None:
            self.executors = executors
        self.starts += 1
        ready = self.workdir / f"runner-ready-{self.starts}.json"
        log = open(self.workdir / "runner.log", "ab")  # noqa: SIM115 - owned by the process
        cmd = [
            sys.executable, "-m", "app.cli", "runner",
            "--job", str(self.job_file),
            "--master", self.master,
            "--control-port", str(self.control_port),
            "--metrics-port", str(self.metrics_port),
            "--executors", str(self.executors),
            "--max-executors", str(self.max_executors),
            "--token-file", str(self.token_file),
            "--ready-file", str(ready),
            *(["--state-partitions", str(state_partitions)] if state_partitions else []),
            *(["--max-records-per-batch", str(max_records_per_batch)]
              if max_records_per_batch else []),
        ]  # fmt: skip
        self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        deadline = time.monotonic() + RUNNER_START_TIMEOUT_SECONDS
        while time.monotonic() < deadline:
            if ready.exists():
                self.info = json.loads(ready.read_text(encoding="utf-8"))
                return self.info
            if self.proc.poll() is not None:
                tail = (self.workdir / "runner.log").read_text(errors="replace")[-3000:]
                raise RuntimeError(f"runner exited with {self.proc.returncode}:\n{tail}")
            time.sleep(0.5)
        self.kill()
        raise RuntimeError(f"runner not ready after {RUNNER_START_TIMEOUT_SECONDS:g} s")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL: a driver crash (chaos), or the last resort."""
        if self.alive() and self.proc is not None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=30)

    def stop(self, timeout: float = 120.0) -> int | None:
        """Stops at a batch boundary (POST /stop), waits for the process to exit."""
        if not self.alive() or self.proc is None:
            return None if self.proc is None else self.proc.returncode
        try:
            self.client.stop()
        except Exception:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return self.proc.returncode


def executor_pids(worker_pids: list[int]) -> list[int]:
    """Executor JVMs: children of our standalone workers."""
    out: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid in worker_pids and b"CoarseGrainedExecutorBackend" in cmdline:
            out.append(int(entry.name))
    return sorted(out)


def kill_pid(pid: int) -> None:
    """SIGKILL one process we own (an executor of our mini-cluster)."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
