"""``stream-autoscaler runner`` and ``stream-autoscaler checkpoint``.

Usage::

    stream-autoscaler runner --job k8s/samples/wordcount.yaml [--master spark://h:7077]
        [--control-port 8081] [--metrics-port 9108] [--executors N] [--max-executors N]
        [--token-file F] [--ready-file F]
    stream-autoscaler runner --script my_job.py [--checkpoint DIR] [--name N] [...] -- ARGS
    stream-autoscaler checkpoint inspect DIR [--rows] | backup DIR DEST | restore BACKUP DIR
        | repartition DIR N

Without ``--master`` (and no ``spec.spark.master``) the runner starts a local mini-cluster with
``--max-executors`` single-executor workers. Exit codes: 0 stopped cleanly, 1 the job failed,
2 bad input (manifest, checkpoint, arguments).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from contracts.api import GROUP_VERSION
from contracts.manifests import ManifestError, load_job, validate
from contracts.runner_api import (
    CONTROL_PORT,
    MAX_PARTITIONS,
    MAX_RECORDS_PER_BATCH,
    METRICS_PORT,
    Phase,
    StopRequest,
)
from contracts.streamjob import MAX_JOB_NAME, StreamJob


def _positive_int(text: str) -> int:
    """An argparse type: an integer in 1..MAX_RECORDS_PER_BATCH, or a clear error."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if not 1 <= n <= MAX_RECORDS_PER_BATCH:
        raise argparse.ArgumentTypeError(f"{n} is not in 1..{MAX_RECORDS_PER_BATCH}")
    return n


def _runner_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="stream-autoscaler runner",
                                description="Run one streaming job with its metrics and "
                                            "control endpoints.")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--job", help="StreamJob manifest (YAML)")
    what.add_argument("--script", help="your own PySpark script, run unmodified (its arguments "
                                       "after --): the shorthand for a StreamJob with "
                                       "spec.application.script")
    p.add_argument("--name", help="--script: the job's name (default: from the file name)")
    p.add_argument("--checkpoint", help="--script: the checkpoint location (default: "
                                        ".stream-autoscaler/<name>/checkpoint)")
    p.add_argument("--trigger", type=float, default=None,
                   help="--script: trigger interval in s (default: the StreamJob default)")
    p.add_argument("--master", help="Spark master URL (default: spec.spark.master, else a local "
                                    "mini-cluster)")
    p.add_argument("--control-port", type=int, default=CONTROL_PORT, help="0 = any free port")
    p.add_argument("--metrics-port", type=int, default=METRICS_PORT, help="0 = any free port")
    p.add_argument("--bind", default="127.0.0.1", help="address of both endpoints")
    p.add_argument("--executors", type=int, help="executors at start (default: spec)")
    p.add_argument("--max-executors", type=int,
                   help="ceiling for scaling (default: the mini-cluster's size, else initial)")
    p.add_argument("--state-partitions", type=int, metavar="N",
                   help="resume at N state partitions: a checkpoint with another count is "
                        "repartitioned (after one batch at its own count, with rollback) before "
                        "the query starts; how a recovery restores with more capacity")
    p.add_argument("--max-records-per-batch", type=_positive_int, metavar="N",
                   help="cap the query's micro-batches at N records (the source's rate limit, "
                        "the lower of N and the job's own; a recovery's admission cap, so what "
                        "piled up while the job was down does not land in one batch)")
    p.add_argument("--no-warm-executors", dest="warm_executors", action="store_false",
                   help="do not warm executors that joined in place before a restart puts the "
                        "query on them (operators/query/warmup.py; for comparison runs)")
    p.add_argument("--workers", type=int, help="mini-cluster workers (default: max executors)")
    p.add_argument("--token", help="bearer token (prefer the env var or a token file)")
    p.add_argument("--token-file", help="token file; created with a new token if absent "
                                        "(default: .stream-autoscaler/<job>.token)")
    p.add_argument("--log-dir", help="mini-cluster logs (default: .stream-autoscaler/<job>/)")
    p.add_argument("--ready-file", help="write {control, metrics, sparkUi, pid} here when ready")
    return p


def runner_main(argv: list[str]) -> int:
    """Entry point of ``stream-autoscaler runner``."""
    script_args: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, script_args = argv[:cut], argv[cut + 1:]
    args = _runner_parser().parse_args(argv)
    try:
        job = load_job(args.job) if args.job else script_job(
            args.script, script_args, name=args.name, checkpoint=args.checkpoint,
            trigger=args.trigger)
    except ManifestError as e:
        print("\n".join(e.problems), file=sys.stderr)
        return 2
    from operators.driver.control import ControlServer, load_token
    from operators.driver.runner import JobRunner, RunnerOptions
    from operators.query.application import ApplicationError
    from operators.query.cluster import ClusterError, MiniCluster
    from operators.state import CheckpointError, RepartitionError

    spec, name = job.spec, job.metadata.name
    home = Path(".stream-autoscaler")
    try:
        token = load_token(args.token, args.token_file or home / f"{name}.token")
    except (OSError, ValueError) as e:
        print(f"token: {e}", file=sys.stderr)
        return 2
    master = args.master or spec.spark.master
    initial = args.executors if args.executors is not None else spec.executors.initial
    max_executors = args.max_executors or max(initial, 1)
    cluster = None
    stop_requested = threading.Event()
    runner = None
    servers: list[Any] = []
    try:
        if master is None:
            workers = args.workers or max_executors
            cluster = MiniCluster(workers=workers, cores_per_worker=spec.executors.cores,
                                  memory_per_worker=_worker_memory(spec.executors.memory),
                                  log_dir=Path(args.log_dir or home / name / "cluster"))
            cluster.start()
            master = cluster.master_url
            max_executors = args.max_executors or workers
        runner = JobRunner(job, RunnerOptions(master=master, max_executors=max_executors,
                                              executors=initial,
                                              state_partitions=args.state_partitions,
                                              max_records_per_batch=args.max_records_per_batch,
                                              warm_executors=args.warm_executors))
        signals = [0]

        def on_signal(*_: Any) -> None:
            # First signal: stop at a batch boundary. Second: shut down now.
            signals[0] += 1
            stop_requested.set()
            if signals[0] > 1:
                raise KeyboardInterrupt

        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, on_signal)
        # Both ports are bound before Spark starts: the session's driver and block-manager
        # ports are bind(0)s, and a port promised to us but bound only after them could be
        # taken in between (tests/integration/spark_runtime/test_applications.py passes both).
        control = ControlServer(runner, token, args.bind, args.control_port or 0)
        servers.append(control)
        metrics_server = runner.metrics.serve(args.metrics_port or 0, args.bind)
        servers.append(metrics_server)
        metrics_port = int(metrics_server[0].server_port)
        runner.start()
        control.start()
        ready = {"control": f"http://{args.bind}:{control.port}",
                 "metrics": f"http://{args.bind}:{metrics_port}/metrics",
                 "sparkUi": runner.pool.ui_url if runner.pool else None,
                 "master": master, "pid": os.getpid(), "queryId": runner.query_id}
        if args.ready_file:
            tmp = Path(args.ready_file + ".tmp")
            tmp.write_text(json.dumps(ready) + "\n", encoding="utf-8")
            tmp.replace(args.ready_file)
        print(f"runner ready: {json.dumps(ready)}", file=sys.stderr, flush=True)
        while not runner.wait_stopped(0.5):
            if stop_requested.is_set() and not runner.actions.busy:
                try:
                    runner.submit(StopRequest())
                except Exception:  # not Running nor Failed: shut down as is
                    break
        return 1 if runner.phase == Phase.FAILED else 0
    except KeyboardInterrupt:
        return 130
    except ClusterError as e:
        print(f"mini-cluster: {e}", file=sys.stderr)
        return 2
    except CheckpointError as e:
        print(f"refusing to start: {e}", file=sys.stderr)
        return 2
    except ValueError as e:  # JobDefinitionError and friends: named problem, no traceback
        print(f"{args.job}: {e}", file=sys.stderr)
        return 2
    except ApplicationError as e:  # the user's own code: its file and line, no traceback
        print(f"application {e}", file=sys.stderr)
        return 1
    except RepartitionError as e:  # --state-partitions whose rollback failed: no query runs
        print(f"{spec.checkpoint.location}: {e}; the query is NOT started: inspect the "
              "checkpoint (stream-autoscaler checkpoint inspect) or restore it from a backup "
              "(stream-autoscaler checkpoint restore)", file=sys.stderr)
        return 1
    finally:
        for s in servers:
            _close(s)
        if runner is not None:
            runner.shutdown()
        if cluster is not None:
            cluster.stop()


def script_job(script: str, args: list[str], *, name: str | None = None,
               checkpoint: str | None = None, trigger: float | None = None) -> StreamJob:
    """The StreamJob ``runner --script`` runs: ``spec.application.script`` with its arguments,
    named after the file unless ``name`` says otherwise. Raises ManifestError."""
    if name is None:
        name = re.sub(r"[^a-z0-9-]+", "-", Path(script).stem.lower()).strip("-")
        name = (name if name[:1].isalpha() else f"job-{name}")[:MAX_JOB_NAME].rstrip("-")
    spec: dict[str, Any] = {
        "application": {"script": script, "args": list(args)},
        "checkpoint": {"location": checkpoint or str(Path(".stream-autoscaler") / name
                                                     / "checkpoint")},
    }
    if trigger is not None:
        spec["trigger"] = {"intervalSeconds": trigger}
    doc = {"apiVersion": GROUP_VERSION, "kind": "StreamJob", "metadata": {"name": name},
           "spec": spec}
    return validate(StreamJob, doc, f"--script {script}")


def checkpoint_main(argv: list[str]) -> int:
    """Entry point of ``stream-autoscaler checkpoint``."""
    p = argparse.ArgumentParser(prog="stream-autoscaler checkpoint",
                                description="Inspect, back up, restore or repartition a "
                                            "checkpoint (its query must be stopped).")
    sub = p.add_subparsers(dest="cmd", required=True, metavar="ACTION")
    i = sub.add_parser("inspect", help="last committed batch, partitions, state per operator")
    i.add_argument("dir")
    i.add_argument("--rows", action="store_true", help="count state rows (starts local Spark)")
    i.add_argument("--job", help="refuse if the checkpoint belongs to another job")
    b = sub.add_parser("backup", help="copy at the last committed batch")
    b.add_argument("dir")
    b.add_argument("dest")
    r = sub.add_parser("restore", help="restore a backup into a new checkpoint directory")
    r.add_argument("backup")
    r.add_argument("dir")
    rp = sub.add_parser("repartition", help="repartition state offline (starts local Spark)")
    rp.add_argument("dir")
    rp.add_argument("partitions", type=int)
    rp.add_argument("--file-sink", metavar="PATH",
                    help="the query writes to Spark's file sink at PATH: log the repartition's "
                         "batch in its _spark_metadata, so the output stays readable")
    args = p.parse_args(argv)
    from operators import state

    try:
        if args.cmd == "inspect":
            info = state.inspect(args.dir, expected_job=args.job)
            out = info.to_dict()
            if args.rows and info.last_committed_batch is not None:
                spark = _local_spark()
                rows = state.state_rows(spark, args.dir)
                for op in out["operators"]:
                    op["rows"] = rows.get(op["operatorId"])
            print(json.dumps(out, indent=2))
        elif args.cmd == "backup":
            lock = state.CheckpointLock(args.dir)  # refuses while a runner uses it
            try:
                batch = state.backup(args.dir, args.dest)
            finally:
                lock.release()
            print(json.dumps({"backup": args.dest, "batch": batch}))
        elif args.cmd == "restore":
            print(json.dumps({"checkpoint": args.dir,
                              "batch": state.restore(args.backup, args.dir)}))
        else:
            if args.partitions < 1 or args.partitions > MAX_PARTITIONS:  # before Spark starts
                raise ValueError(f"partitions ({args.partitions}): an integer in "
                                 f"1..{MAX_PARTITIONS}")
            state.inspect(args.dir)
            lock = state.CheckpointLock(args.dir)
            try:
                res = state.repartition(_local_spark(), args.dir, args.partitions,
                                        file_sink=args.file_sink)
            finally:
                lock.release()
            print(json.dumps(res.__dict__))
    except (state.CheckpointError, state.RepartitionError, FileExistsError, ValueError) as e:
        print(str(e), file=sys.stderr)
        return 2
    except OSError as e:  # disk full, permissions: nothing half-written is left at the target
        print(f"checkpoint {args.cmd}: {e.strerror or e} ({e.filename or args.dir}); "
              "nothing was changed at the destination", file=sys.stderr)
        return 2
    return 0


def _local_spark() -> Any:
    from pyspark.sql import SparkSession

    from operators.query.job import PROVIDER_KEY, ROCKSDB_PROVIDER

    return (SparkSession.builder.master("local[2]").config(PROVIDER_KEY, ROCKSDB_PROVIDER)
            .config("spark.ui.enabled", "false").getOrCreate())


def _worker_memory(executor_memory: str) -> str:
    """Worker memory: the executor heap plus room (Spark adds overhead on top of the heap)."""
    units = {"k": 1 / 1024, "m": 1, "g": 1024, "t": 1024 * 1024}
    s = executor_memory.lower()
    mb = float(s[:-1]) * units[s[-1]] if s[-1] in units else float(s) / (1024 * 1024)
    return f"{int(mb * 2) + 256}m"


def _close(server: Any) -> None:
    try:
        if hasattr(server, "stop"):
            server.stop()
        elif isinstance(server, tuple):
            server[0].shutdown()
        elif hasattr(server, "shutdown"):
            server.shutdown()
    except Exception:
        pass
