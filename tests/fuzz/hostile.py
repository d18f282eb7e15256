"""The fuzz tier's generators for what a StreamJob author may try against the cluster: Spark
settings and JVM flags that shape pods, mount paths over the system, URLs that parsers read
apart, checkpoints that are not what they say, simulator models that are not finite.

Each generator returns the input and what must happen to it, declared here independently of
the code under test (a bypass list of our own, not the allowlist it tests): ``must_refuse``
inputs that are accepted are a defect (``bypass``), as is an allowed URL whose request goes
elsewhere (``elsewhere``). Deterministic from the worker's seed.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from pathlib import Path
from typing import Any

BYPASS_KEYS: tuple[str, ...] = (
    "spark.kubernetes.executor.secrets.db-password",
    "spark.kubernetes.executor.volumes.hostPath.root.mount.path",
    "spark.kubernetes.executor.volumes.hostPath.root.options.path",
    "spark.kubernetes.executor.pod.featureSteps",
    "spark.kubernetes.executor.podTemplateFile",
    "spark.kubernetes.executor.hadoopConfigMapName",
    "spark.kubernetes.executor.annotation.x",
    "spark.kubernetes.executor.label.app.kubernetes.io/name",
    "spark.kubernetes.node.selector.kubernetes.io/hostname",
    "spark.kubernetes.executor.scheduler.name",
    "spark.kubernetes.authenticate.driver.serviceAccountName",
    "spark.kubernetes.authenticate.executor.serviceAccountName",
    "spark.kubernetes.container.image",
    "spark.kubernetes.namespace",
    "spark.jars",
    "spark.jars.packages",
    "spark.driver.extraClassPath",
    "spark.executor.extraLibraryPath",
    "spark.driver.defaultJavaOptions",
    "spark.executor.defaultJavaOptions",
    "spark.executorEnv.LD_PRELOAD",
    "spark.kubernetes.driverEnv.X",
    "spark.authenticate",
    "spark.authenticate=false",
    "spark.sql.x=1\nspark.authenticate",
    "spark.ui.port",
    "spark.ui.killEnabled",
    "spark.master",
    "spark.dynamicAllocation.enabled",
    "spark.executor.instances",
    "spark.driver.host",
    "Spark.Jars",
    " spark.jars",
    "spark.jars\u200b",
    "spark.kubernetes.executor.secrets.x\t",
)
"""Settings that shape pods, mounts, identities, networking, the classpath or the executor
count, and spellings that smuggle one (case, whitespace, ``=``, a newline, a zero-width
space): each must be refused in the cluster."""

TAME_KEYS: tuple[str, ...] = (
    "spark.sql.shuffle.partitions", "spark.sql.adaptive.enabled", "spark.shuffle.compress",
    "spark.memory.fraction", "spark.serializer", "spark.network.timeout",
    "spark.hadoop.fs.s3a.connection.maximum", "spark.kafka.consumer.cache.capacity",
)
"""Settings a job needs: accepted or refused for their value, never a defect."""

GOOD_JVM = ("-XX:+UseG1GC", "-XX:MaxGCPauseMillis=200", "-Xss4m", "-verbose:gc",
            "-Xlog:gc*:stdout", "-XX:+ExitOnOutOfMemoryError", "-XX:TieredStopAtLevel=1")
BAD_JVM = ("-Dspark.kubernetes.executor.secrets.x=/m", "-Dspark.authenticate=false", "-Dx=y",
           "-javaagent:/tmp/a.jar", "-agentlib:jdwp=transport=dt_socket", "-cp", "/tmp/x.jar",
           "-XX:+UnlockDiagnosticVMOptions", "-XX:OnOutOfMemoryError=sh", "-Xlog:gc:file=/etc/x",
           "-XX:HeapDumpPath=/etc", "@/etc/passwd", "\u2212Dspark.jars=x", "-D", "--add-opens",
           "-XX:+UseG1GC\u00a0-Dx=y", "-Xbootclasspath/a:/tmp")
"""JVM flags: the first from the vetted set; the second never (a ``-D`` becomes a SparkConf
default, an agent or a classpath runs code, an argument file reads one)."""

SYSTEM_PATHS = ("/etc", "/etc/ssl", "/var/run/secrets", "/var/run/secrets/kubernetes.io",
                "/usr", "/usr/local/lib", "/opt/venv", "/opt/stream-autoscaler", "/root",
                "/proc", "/dev", "/var/data", "/bin", "/lib64", "/run")
MOUNT_TRICKS = ("/ck/../etc", "/ck/./x", "//etc", "/etc/", "/ck//x", "ck", "/ck\n/etc",
                "/ck x", "/ck/\u2025/etc", "/ck/%2e%2e/etc")


def cluster_job(base: dict[str, Any], rng: random.Random) -> tuple[bytes, bool]:
    """A managed StreamJob with one hostile Spark setting, JVM flag string or mount path."""
    doc = json.loads(json.dumps(base))
    spec = doc["spec"]
    conf = spec.setdefault("spark", {}).setdefault("conf", {})
    kind = rng.random()
    must_refuse = False
    if kind < 0.4:
        if rng.random() < 0.7:
            conf[rng.choice(BYPASS_KEYS)] = rng.choice(["/mnt/x", "true", "x", "", "0"])
            must_refuse = True
        else:
            conf[rng.choice(TAME_KEYS)] = rng.choice(["8", "true", "x" * 5000, "", "\x00", "-1"])
    elif kind < 0.75:
        flags = [rng.choice(GOOD_JVM) for _ in range(rng.randint(0, 3))]
        if rng.random() < 0.7:
            flags.insert(rng.randint(0, len(flags)), rng.choice(BAD_JVM))
            must_refuse = True
        key = rng.choice(["spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions"])
        conf[key] = rng.choice([" ", "  ", "\t"]).join(flags)
    else:
        if rng.random() < 0.6:
            path = rng.choice(SYSTEM_PATHS) + rng.choice(["", "/", "/x", "/x/y"])
        else:
            path = rng.choice(MOUNT_TRICKS)
        must_refuse = True
        spec["checkpoint"] = {"location": path.rstrip("/") + "/job" if path.startswith("/")
                              else "/ck/job", "volume": {"claimName": "ck", "mountPath": path}}
    import yaml

    return yaml.safe_dump(doc, allow_unicode=True).encode("utf-8"), must_refuse


ALLOWED = "wc-runner.jobs.svc"
ATTACKERS = ("attacker.example", "169.254.169.254", "127.0.0.1", "[::1]", "10.0.0.7",
             "evil.svc.attacker.example", "wc-runner.jobs.svc.attacker.example",
             "0x7f000001", "2130706433", "wc-runnér.jobs.svc", "WC-RUNNER.JOBS.SVC")
GLUE = ("@", "\\@", "\\", "#@", "?@", "%40", ":80@", "/../", "/./", "%2e%2e/", "\t", " ", "\x00",
        "\r\n", "%00", "&", ";", ",", "/", "//", "\u3002", "\uff0e", "")


def hostile_url(rng: random.Random) -> str:
    """An attach URL built from an allowed host, an attacker's and what glues them."""
    scheme = rng.choice(["http", "https", "HTTP", "file", "gopher", "http:", ""])
    a, b = rng.choice(ATTACKERS), ALLOWED
    if rng.random() < 0.5:
        a, b = b, a
    port = rng.choice(["", ":8081", ":0", ":99999", ":-1", ":80:80", ":8081\\"])
    path = rng.choice(["", "/status", "/../latest/meta-data/", "/a/%2e%2e/b", "?x=@" + a,
                       "#@" + a, "/" + "a" * 3000])
    return f"{scheme}://{a}{rng.choice(GLUE)}{b}{port}{path}"


def connected_host(url: str) -> str | None:
    """The host ``requests`` would connect to for ``url`` (None if it would not send it)."""
    import requests
    from urllib3.util import parse_url

    try:
        prepared = requests.Request("GET", url).prepare()
        return (parse_url(prepared.url or "").host or "").lower().strip("[]")
    except Exception:  # requests refuses it: nothing is sent
        return None


def hostile_checkpoint(root: Path, rng: random.Random) -> tuple[Path, str]:
    """A checkpoint as Spark writes it, with one or two hostile entries (and what they are)."""
    cp = root / "cp"
    (cp / "offsets").mkdir(parents=True)
    (cp / "commits").mkdir()
    (cp / "metadata").write_text(json.dumps({"id": "4f1c2d3e-0000-4000-8000-000000000001"}))
    meta = {"batchWatermarkMs": 0, "batchTimestampMs": 1,
            "conf": {"spark.sql.shuffle.partitions": "4"}}
    last = rng.randint(0, 5)
    for b in range(last + 1):
        (cp / "offsets" / str(b)).write_text(f"v1\n{json.dumps(meta)}\n{{\"main\": {b}}}\n")
        if b < last or rng.random() < 0.5:
            (cp / "commits" / str(b)).write_text('v1\n{"nextBatchWatermarkMs":0}\n')
    done = []
    for _ in range(rng.randint(1, 2)):
        target = cp / rng.choice(["metadata", f"offsets/{last}", "commits/0",
                                  f"offsets/{rng.choice([10**8, 2**63, -1, 'x', '1e3'])}",
                                  "state/0/0/1.delta", "stream-autoscaler-owner.json",
                                  "stream-autoscaler-backup.json"])
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        elif target.exists() or target.is_symlink():
            target.unlink()
        what = rng.choice(["fifo", "dev-zero", "etc-link", "loop-link", "sparse", "deep",
                           "bytes", "conf-list", "huge-number", "empty", "directory"])
        done.append(f"{target.relative_to(cp)}: {what}")
        if what == "fifo":
            os.mkfifo(target)
        elif what == "dev-zero":
            target.symlink_to("/dev/zero")
        elif what == "etc-link":
            target.symlink_to("/etc")
        elif what == "loop-link":
            target.symlink_to(target)
        elif what == "sparse":
            with open(target, "wb") as f:
                f.truncate(rng.choice([64 << 20, 4 << 30]))
        elif what == "deep":
            target.write_text("v1\n" + "[" * rng.randint(1000, 200_000) + "\n")
        elif what == "bytes":
            target.write_bytes(bytes(rng.randrange(256) for _ in range(rng.randint(0, 300))))
        elif what == "conf-list":
            target.write_text('v1\n{"conf": [1, 2], "batchWatermarkMs": "x"}\n{}\n')
        elif what == "huge-number":
            target.write_text('v1\n{"batchWatermarkMs": 1e999, "conf": {}}\n{"main": '
                              + "9" * 5000 + "}\n")
        elif what == "empty":
            target.write_text("")
        else:
            target.mkdir()
    return cp, "; ".join(done)


MODEL_KEYS = ("executor_start_seconds", "restart_seconds", "batch_overhead_seconds",
              "keys", "initial_keys", "state_bytes_per_key", "repartition_bytes_per_second",
              "executorStartSeconds", "cores_per_executor", "stages")
MODEL_VALUES: tuple[Any, ...] = (".inf", "-.inf", ".nan", 0, -1, 1e-300, 5e-324, 1e308, 10**40,
                                 "x", [], {}, None, True, 1e-9, 0.5, 3)


def hostile_model(rng: random.Random) -> str:
    """A simulator ``--model`` file with one to three hostile parameters."""
    lines = []
    for _ in range(rng.randint(1, 3)):
        value = rng.choice(MODEL_VALUES)
        shown = value if isinstance(value, str) else json.dumps(value)
        lines.append(f"{rng.choice(MODEL_KEYS)}: {shown}")
    return "\n".join(lines) + "\n"
