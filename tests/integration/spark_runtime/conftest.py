"""Fixtures for the runtime tests: one Spark standalone mini-cluster on loopback for the whole
folder, and runners started as subprocesses (``stream-autoscaler runner``), as a user would.

Without Java or pyspark the tests skip locally and FAIL in CI (``CI=true``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.realcomponents import require_spark

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="package")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """Three 1-core workers: room for 1 -> 3 executors."""
    require_spark()
    from operators.query.cluster import MiniCluster

    logs = tmp_path_factory.mktemp("cluster")
    with MiniCluster(workers=3, cores_per_worker=1, memory_per_worker="1280m", log_dir=logs) as c:
        yield c


@pytest.fixture(scope="package")
def local_spark() -> Iterator[Any]:
    """A local session in the test process, for the exactly-once verifier."""
    require_spark()
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    from operators.query.job import PROVIDER_KEY, ROCKSDB_PROVIDER

    spark = (SparkSession.builder.master("local[1]").appName("runtime-tests-verifier")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config(PROVIDER_KEY, ROCKSDB_PROVIDER).getOrCreate())
    yield spark
    spark.stop()


def write_job(directory: Path, name: str = "rt", rate: int = 2000, partitions: int = 4) -> Path:
    """A word-count-like StreamJob: burst source at ``rate``/s, count per key, files sink."""
    directory.mkdir(parents=True, exist_ok=True)
    trace = directory / "trace.csv"
    trace.write_text(f"t,input_rate\n0,{rate}\n", encoding="utf-8")
    job = {
        "apiVersion": "stream-autoscaler.io/v1alpha1",
        "kind": "StreamJob",
        "metadata": {"name": name},
        "spec": {
            "source": {"type": "burst", "trace": str(trace), "keys": 500, "partitions": 2,
                       "seed": 7},
            "pipeline": [{"type": "aggregate", "name": "count-per-key", "keys": ["key"]}],
            "sink": {"type": "files", "path": str(directory / "out"), "format": "parquet",
                     "outputMode": "update"},
            "trigger": {"intervalSeconds": 1},
            "checkpoint": {"location": str(directory / "cp")},
            "statePartitions": partitions,
            "executors": {"initial": 1, "cores": 1, "memory": "512m"},
        },
    }
    path = directory / "job.yaml"
    path.write_text(yaml.safe_dump(job), encoding="utf-8")
    return path


class Runner:
    """A ``stream-autoscaler runner`` subprocess and an HTTP client for its endpoints."""

    def __init__(self, job: Path | list[str], master: str, workdir: Path,
                 env: dict[str, str] | None = None, token: str = "test-token",
                 max_executors: int = 3) -> None:
        """``job``: a StreamJob manifest, or the runner's arguments for one (``--script F
        --checkpoint D -- ARGS``, last on the command line). ``max_executors``: the runner's
        ceiling (see :func:`start_runner`)."""
        self.job, self.workdir, self.token = job, workdir, token
        self.ready_file = workdir / f"ready-{time.monotonic_ns()}.json"
        self.log_path = workdir / f"runner-{time.monotonic_ns()}.log"
        token_file = workdir / "token"
        token_file.write_text(token + "\n", encoding="utf-8")
        what = ["--job", str(job)] if isinstance(job, Path) else list(job)
        cmd = [sys.executable, "-m", "app.cli", "runner",
               "--master", master, "--control-port", "0", "--metrics-port", "0",
               "--max-executors", str(max_executors), "--token-file", str(token_file),
               "--ready-file", str(self.ready_file), *what]
        full_env = {**os.environ, **(env or {})}
        full_env.pop("STREAM_AUTOSCALER_TOKEN", None)
        self.log = self.log_path.open("wb")
        self.proc = subprocess.Popen(cmd, cwd=REPO, env=full_env, stdout=self.log,
                                     stderr=subprocess.STDOUT)
        self.ready: dict[str, Any] = {}

    def wait_ready(self, timeout: float = 180) -> Runner:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.ready_file.exists():
                self.ready = json.loads(self.ready_file.read_text())
                return self
            if self.proc.poll() is not None:
                raise AssertionError(f"runner exited {self.proc.returncode}:\n{self.tail()}")
            time.sleep(0.5)
        raise AssertionError(f"runner not ready after {timeout} s:\n{self.tail()}")

    def tail(self, n: int = 40) -> str:
        lines = self.log_path.read_text(errors="replace").splitlines()
        return "\n".join(line for line in lines if "WARN" not in line)[-6000:] if lines else ""

    def call(self, method: str, path: str, body: Any = None, token: str | None = None
             ) -> tuple[int, dict[str, Any]]:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.ready["control"] + path, data=data, method=method)
        req.add_header("Authorization", f"Bearer {token or self.token}")
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"{}")

    def status(self) -> dict[str, Any]:
        code, body = self.call("GET", "/status")
        assert code == 200, body
        return body

    def metrics(self) -> str:
        with urllib.request.urlopen(self.ready["metrics"], timeout=10) as r:
            return r.read().decode()

    def wait(self, pred: Callable[[dict[str, Any]], bool], timeout: float = 180,
             what: str = "condition") -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        last: dict[str, Any] = {}
        while time.monotonic() < deadline:
            last = self.status()
            if pred(last):
                return last
            time.sleep(0.5)
        raise AssertionError(f"timed out waiting for {what}; last status {last}\n{self.tail()}")

    def action(self, path: str, body: Any, timeout: float = 240) -> dict[str, Any]:
        """POST an action, wait for it to finish; returns the finished action record. A failed
        one's record starts with its error (a test's assertion message is the record, and a
        summary line shows only its first characters) and its runner's log tail is printed."""
        code, resp = self.call("POST", path, body)
        assert code == 202, (code, resp)
        action_id = resp["action"]
        st = self.wait(lambda s: (s.get("lastAction") or {}).get("id") == action_id, timeout,
                       f"action {path} {body}")
        record: dict[str, Any] = st["lastAction"]
        if record.get("state") != "succeeded":
            print(f"action {path} {body} {record.get('state')}: {record.get('error')}\n"
                  f"{self.tail()}")
            record = {"error": record.get("error"), **record}
        return record

    def stop(self, timeout: float = 120) -> int:
        if self.proc.poll() is None:
            code, _ = self.call("POST", "/stop", {})
            assert code in (202, 409), code
        try:
            return self.proc.wait(timeout)
        finally:
            self.close()

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)
        self.close()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)
        self.log.close()


@pytest.fixture
def start_runner(cluster: Any, tmp_path: Path) -> Iterator[Callable[..., Runner]]:
    """Start runners on the shared cluster; every one left is killed at the end of the test.

    ``max_executors`` is the runner's ceiling (``spark.cores.max``). Spark standalone starts
    that many executors when the application registers, and the runner kills them down to the
    job's initial count (operators/query/session.py, ``ExecutorPool.settle``): a runner that
    will never scale out is started with 1, so it pays one executor JVM instead of three."""
    started: list[Runner] = []

    def start(job: Path | list[str], env: dict[str, str] | None = None,
              max_executors: int = 3) -> Runner:
        r = Runner(job, cluster.master_url, tmp_path, env, max_executors=max_executors)
        started.append(r)
        return r.wait_ready()

    yield start
    for r in started:
        r.close()
