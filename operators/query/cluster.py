"""A Spark standalone mini-cluster on loopback, started from the pip package.

Usage::

    with MiniCluster(workers=3, cores_per_worker=1, log_dir=Path("out/cluster")) as cluster:
        spark = SparkSession.builder.master(cluster.master_url).getOrCreate()

The master and each worker are real JVMs (``$SPARK_HOME/bin/spark-class``, SPARK_HOME = the
pyspark package directory), so executors are real processes and executor scaling is real on one
machine. Ports are picked free at start; readiness is the master's web UI JSON reporting every
worker ALIVE. ``stop()`` ends only the processes this object started, by PID.

``executor_cpus=0.25`` caps each worker, and so the executor it forks, at a quarter of a core
(a CFS quota, :mod:`operators.query.cgroups`) — what a pod's CPU limit does — so that several
executors share a small machine as pods share a node (what each added one delivers is measured
in docs/benchmark.md, not assumed). The worker JVM starts
uncapped and is moved into its group once ALIVE (it is idle after that); the executors start
inside it.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from contracts.ports import free_port
from operators.errors import OperatorsError
from operators.query.cgroups import CpuQuota

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"


class ClusterError(OperatorsError, RuntimeError):
    """The mini-cluster could not start (no Java, no pyspark, a JVM died, a timeout)."""


def spark_home() -> Path:
    """The pyspark package directory, which holds ``bin/spark-class`` and ``jars/``."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


JVM_ARCHIVE_ENV = "STREAM_AUTOSCALER_JVM_ARCHIVE"
"""Names a class-data-sharing archive of the classes a Spark driver loads: the image sets it (its
archive is dumped at build, Dockerfile). Set but empty, or naming no file: the JVMs start as Spark
starts them. Unset: this install's archive (:data:`INSTALL_JVM_ARCHIVE`), where one is built."""
INSTALL_JVM_ARCHIVE = Path(sys.prefix) / "share" / "stream-autoscaler" / "spark-classes.jsa"
"""Where ``hack/jvm-archive/build.sh`` dumps the archive of this venv's PySpark (``make demo`` and
``make test`` build it, once per machine and PySpark build)."""


def jvm_archive(environ: Mapping[str, str] | None = None,
                installed: Path = INSTALL_JVM_ARCHIVE) -> Path | None:
    """The class archive Spark's JVMs map, or None: the one :data:`JVM_ARCHIVE_ENV` names, else
    ``installed`` where it is newer than PySpark's jars (a reinstalled PySpark makes it stale;
    build.sh's own up-to-date check). A JVM whose class path does not start with the one the
    archive was dumped on runs without it and says so in one warning line; the JVM's own check,
    not ours, decides (tests/unit/operators/query/test_session_env.py; the runner's JVMs on the
    mini-cluster: tests/integration/spark_runtime/jvm_archive_check.py::
    assert_the_jvms_map_the_installs_archive, in test_runner.py::
    test_an_idle_query_reports_nothing_waiting_even_right_after_a_restart)."""
    env = os.environ if environ is None else environ
    if JVM_ARCHIVE_ENV in env:
        named = env[JVM_ARCHIVE_ENV]
        return Path(named) if named and os.path.isfile(named) else None
    try:
        fresh = installed.stat().st_mtime >= (spark_home() / "jars").stat().st_mtime
    except (OSError, ImportError):
        return None
    return installed if fresh else None


def jvm_archive_flag(archive: Path) -> str:
    """The JVM option that maps ``archive``."""
    return f"-XX:SharedArchiveFile={archive}"


def spark_env(python: str | None = None) -> dict[str, str]:
    """Environment for Spark JVMs and executors: loopback only, the venv's Python.

    Executors run ``PYSPARK_PYTHON``; it must be the interpreter that can import this project,
    or Python UDFs and Python data sources fail on the executors.
    """
    env = dict(os.environ)
    env["SPARK_HOME"] = str(spark_home())
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    env["SPARK_LOCAL_HOSTNAME"] = "localhost"
    env["PYSPARK_PYTHON"] = python or sys.executable
    env["PYSPARK_DRIVER_PYTHON"] = python or sys.executable
    project_root = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (project_root, env.get("PYTHONPATH")) if p)
    return env


@dataclass
class _Proc:
    name: str
    popen: subprocess.Popen[bytes]
    log: IO[bytes]
    ui_port: int


@dataclass
class MiniCluster:
    """One standalone master and ``workers`` workers on 127.0.0.1."""

    workers: int = 1
    cores_per_worker: int = 1
    memory_per_worker: str = "1g"
    log_dir: Path | None = None
    """Where each JVM's stdout/stderr goes; a temporary directory when None."""
    start_timeout: float = 60.0
    executor_cpus: float | None = None
    """Cores each worker's executor may use (a CFS quota per worker); None = no quota."""
    die_with_parent: bool = True
    """Linux: the JVMs get SIGTERM when the thread that started them ends (its process exits
    or is SIGKILLed), so a killed runner leaves no cluster behind. Start from a long-lived
    thread (the main one)."""
    master_url: str = field(default="", init=False)
    master_ui_url: str = field(default="", init=False)
    _procs: list[_Proc] = field(default_factory=list, init=False, repr=False)
    _quotas: list[CpuQuota] = field(default_factory=list, init=False, repr=False)

    @property
    def total_cores(self) -> int:
        """Task slots the cluster can give executors."""
        return self.workers * self.cores_per_worker

    def start(self) -> MiniCluster:
        """Start the master, then the workers; return when all workers are ALIVE."""
        if self._procs:
            return self
        home = spark_home()
        spark_class = home / "bin" / "spark-class"
        if not spark_class.exists():
            raise ClusterError(f"{spark_class} not found: is pyspark installed?")
        if not _java_available():
            raise ClusterError("java not found on PATH (nor JAVA_HOME): Spark needs Java 17+")
        log_dir = self.log_dir or Path(tempfile.mkdtemp(prefix="sa-cluster-"))
        log_dir.mkdir(parents=True, exist_ok=True)
        self.log_dir = log_dir
        env = spark_env()
        archive = jvm_archive()
        if archive is not None:  # the master and workers start on it too
            env["SPARK_DAEMON_JAVA_OPTS"] = " ".join(
                o for o in (env.get("SPARK_DAEMON_JAVA_OPTS"), jvm_archive_flag(archive)) if o)
        try:
            port, ui_port = free_port(), free_port()
            self.master_url = f"spark://127.0.0.1:{port}"
            self.master_ui_url = f"http://127.0.0.1:{ui_port}"
            self._spawn(
                "master",
                [
                    str(spark_class),
                    MASTER_CLASS,
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(port),
                    "--webui-port",
                    str(ui_port),
                ],
                env,
                ui_port,
            )
            self._wait(lambda info: info.get("status") == "ALIVE", "master ALIVE")
            for i in range(self.workers):
                wport, wui = free_port(), free_port()
                work_dir = log_dir / f"worker-{i}-work"
                work_dir.mkdir(exist_ok=True)
                self._spawn(
                    f"worker-{i}",
                    [
                        str(spark_class),
                        WORKER_CLASS,
                        "--host",
                        "127.0.0.1",
                        "--port",
                        str(wport),
                        "--webui-port",
                        str(wui),
                        "--cores",
                        str(self.cores_per_worker),
                        "--memory",
                        self.memory_per_worker,
                        "--work-dir",
                        str(work_dir),
                        self.master_url,
                    ],
                    env,
                    wui,
                )
            self._wait(
                lambda info: (
                    sum(w.get("state") == "ALIVE" for w in info.get("workers", [])) >= self.workers
                ),
                f"{self.workers} workers ALIVE",
            )
            if self.executor_cpus is not None:
                self._cap_workers(self.executor_cpus)
        except BaseException:
            self.stop()
            raise
        return self

    def master_info(self) -> dict[str, Any]:
        """The master's web UI JSON (workers, cores, active apps)."""
        with urllib.request.urlopen(self.master_ui_url + "/json/", timeout=5) as r:
            data: dict[str, Any] = json.loads(r.read())
            return data

    def stop(self) -> None:
        """Stop the workers, then the master: SIGTERM, then SIGKILL after 10 s. Idempotent."""
        for proc in reversed(self._procs):
            _terminate(proc.popen)
            proc.log.close()
        self._procs.clear()
        for quota in self._quotas:
            quota.remove()
        self._quotas.clear()

    @property
    def quotas(self) -> list[CpuQuota]:
        """The workers' CPU quotas (empty without ``executor_cpus``)."""
        return list(self._quotas)

    def _cap_workers(self, cpus: float) -> None:
        tag = f"cluster-{os.getpid()}-{secrets.token_hex(3)}"
        for proc in self._procs:
            if proc.name.startswith("worker"):
                quota = CpuQuota.create(f"{tag}-{proc.name}", cpus)
                self._quotas.append(quota)
                quota.add(proc.popen.pid)

    def __enter__(self) -> MiniCluster:
        return self.start()

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def _spawn(self, name: str, cmd: list[str], env: dict[str, str], ui_port: int) -> None:
        assert self.log_dir is not None
        log = (self.log_dir / f"{name}.log").open("ab")
        # Own session: a Ctrl-C in the terminal goes to the runner, which stops us in order.
        popen = subprocess.Popen(
            cmd,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=_die_with_parent if self.die_with_parent else None,
        )
        self._procs.append(_Proc(name, popen, log, ui_port))

    def _wait(self, ready: Any, what: str) -> None:
        deadline = time.monotonic() + self.start_timeout
        last_error = ""
        while time.monotonic() < deadline:
            for proc in self._procs:
                if proc.popen.poll() is not None:
                    raise ClusterError(
                        f"{proc.name} exited with {proc.popen.returncode} while waiting for "
                        f"{what}; see {self.log_dir}/{proc.name}.log"
                    )
            try:
                if ready(self.master_info()):
                    return
            except (OSError, ValueError) as e:  # not listening yet, or an empty page while
                last_error = str(e)  # its UI starts (seen on a loaded machine)
            time.sleep(0.3)
        raise ClusterError(
            f"timed out after {self.start_timeout:.0f} s waiting for {what} "
            f"({last_error or 'not ready'}); logs in {self.log_dir}"
        )


def _die_with_parent() -> None:
    """In the child before exec: ask the kernel for SIGTERM when the parent dies (Linux).

    spark-class ends by exec'ing java, which keeps the setting."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


def _java_available() -> bool:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").exists():
        return True
    from shutil import which

    return which("java") is not None


def _terminate(popen: subprocess.Popen[bytes]) -> None:
    """SIGTERM the JVM we started (spark-class execs java, so the PID is the JVM)."""
    if popen.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        popen.send_signal(signal.SIGTERM)
    try:
        popen.wait(timeout=10)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            popen.kill()
        popen.wait(timeout=10)
