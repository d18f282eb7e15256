"""Each restart kind on real Spark, step by step, beside a baseline revision of the runner.

    .venv/bin/python benchmarks/restarts.py [--baseline REV] [--keys 100000] [--rate 600]
        [--variants baseline,cold,current] [--kinds cap,respread,repartition,recovery]
        [--event-log] [--out out/bench-restarts]          (make bench-restarts)

One Spark standalone mini-cluster on loopback (three 1-core workers, each executor capped at half
a core), and for each variant (``baseline``: the runner of ``--baseline``, checked out in a git
worktree; ``cold``: this tree with ``--no-warm-executors``; ``current``: this tree, whose
executors that join in place are warmed before a restart) one ``stream-autoscaler runner``
subprocess on a burst source
(``--rate`` records/s over ``--keys`` keys, counted per key, a parquet sink, a 2 s trigger, 4
state partitions; a prefill of three records per key first, on 3 executors), which runs, in
order, each once the lag has settled:

* ``cap``: a restart at the same state partitions with an admission cap (what the engine's cap
  change sends);
* ``respread``: executors 3 -> 1 and back to 3 in place, then a restart at the same count (the
  state spread over the new executors);
* ``repartition``: 4 -> 8 state partitions with every key in state (Spark's offline rewrite);
* ``recovery``: the runner SIGKILLed, a new one started on the checkpoint with 3 executors (the
  driver pod's replacement): kill -> first commit.

Per kind (``restarts.json``): ``trigger_seconds``, ``request_to_first_commit_seconds`` (a
re-spread's includes the wait for its executors' warm-up, during which the job commits), the
``down`` timing (the stop -> the first commit: what the job did not commit),
``lag_added_seconds`` (the oldest waiting record's age as the runner reports it, its peak
after the request less its level before; it read 0 across 20 s pauses in the first runs, so it
is not yet a measure of a restart's lag: docs/benchmark.md), ``slo_seconds`` (``--slo``),
``steps`` (the runner's per-step seconds, where its revision records them) and per variant
``exactly_once`` (the verifier over the whole run). The
targets are printed beside the figures: request -> first commit <= 2 triggers + 3 s for a cap
change or a re-spread, <= 2 triggers + 8 s for a repartition; kill -> first commit <= 30 s; the
lag a restart adds <= 25% of the SLO.

The executors import the burst source from the installed tree in every variant: the source is
not what is compared, the driver's restart path is. ``--event-log`` keeps Spark's event log of
each runner in its scratch directory: the per-task figures of the batches around each restart.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from contracts.runner_api import ActionRecord, RunnerStatus  # noqa: E402
from controller.adapters.runner_client import RunnerClient  # noqa: E402

BASELINE_REVISION = "e930054497c118ab929b4043d5459ef38371fe21"
"""The runner before step timings and the gap-aware stop (a commit on main: a tag would not
reach a fresh clone)."""
KINDS = ("cap", "respread", "repartition", "recovery")
VARIANTS = ("baseline", "cold", "current")
"""The runners compared: the baseline revision's, this tree's with its executors left cold
(``--no-warm-executors``: the path before the warm-up, on today's code) and this tree's."""
TRIGGER_SECONDS = 2.0
PARTITIONS = 4
CAP = 4_000
"""The cap change's admission cap: above the rate, so the pile of the restart drains."""
TARGET_SLACK_SECONDS = {"cap": 3.0, "respread": 3.0, "repartition": 8.0}
"""Request -> first commit may take two triggers plus this."""
RECOVERY_TARGET_SECONDS = 30.0
LAG_TARGET_SHARE = 0.25
"""The lag one restart adds, as a share of the SLO."""
SETTLE_TIMEOUT_SECONDS = 240.0


@dataclass
class Kind:
    """One restart's figures."""

    request_to_first_commit_seconds: float | None = None
    lag_added_seconds: float | None = None
    steps: dict[str, float] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    first_batch: dict[str, Any] | None = None
    """A recovery's first committed batch (``/status`` ``startFirstBatch``: ``rows``,
    ``seconds``, ``replayed``): what its ``first_commit`` step ran."""


class Runner:
    """A ``stream-autoscaler runner`` subprocess run from ``tree`` (its revision's code)."""

    def __init__(self, tree: Path, job: Path, master: str, work: Path, *extra: str) -> None:
        self.ready_file = work / f"ready-{time.monotonic_ns()}.json"
        token = work / "token"
        token.write_text("bench-token\n", encoding="utf-8")
        self.log = (work / f"runner-{time.monotonic_ns()}.log").open("wb")
        env = {**os.environ, "PYTHONPATH": str(tree)}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "app.cli", "runner", "--job", str(job), "--master", master,
             "--control-port", "0", "--metrics-port", "0", "--max-executors", "3",
             "--token-file", str(token), "--ready-file", str(self.ready_file), *extra],
            cwd=tree, env=env, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + SETTLE_TIMEOUT_SECONDS
        while not self.ready_file.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"runner not ready (exit {self.proc.poll()}): {self.log.name}")
            time.sleep(0.25)
        ready = json.loads(self.ready_file.read_text())
        self.client = RunnerClient(ready["control"], "bench-token")

    def status(self) -> RunnerStatus:
        return self.client.status()

    def wait(self, what: str, done: Callable[[RunnerStatus], bool],
             timeout: float = SETTLE_TIMEOUT_SECONDS) -> RunnerStatus:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            st = self.status()
            if done(st):
                return st
            time.sleep(0.25)
        raise RuntimeError(f"{what}: not within {timeout:g} s")

    def kill(self) -> float:
        """SIGKILL (a lost driver); the monotonic time of the kill."""
        at = time.monotonic()
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)
        self.log.close()
        return at

    def stop(self) -> None:
        self.client.stop()
        self.proc.wait(SETTLE_TIMEOUT_SECONDS)
        self.log.close()


def write_job(work: Path, keys: int, rate: int, event_log: bool = False) -> Path:
    """The bench's StreamJob: a prefill that puts every key in state, then ``rate``/s."""
    prefill = max(rate, keys * 3 // 10)  # 3 draws a key in 10 s: all but e^-3 (5%) in state
    trace = work / "trace.csv"
    trace.write_text(f"t,input_rate\n0,{prefill}\n10,{rate}\n", encoding="utf-8")
    spec: dict[str, Any] = {
        "source": {"type": "burst", "trace": str(trace), "keys": keys, "partitions": 2,
                   "seed": 11},
        "pipeline": [{"type": "aggregate", "name": "count-per-key", "keys": ["key"]}],
        "sink": {"type": "files", "path": str(work / "out"), "format": "parquet",
                 "outputMode": "update"},
        "trigger": {"intervalSeconds": TRIGGER_SECONDS},
        "checkpoint": {"location": str(work / "cp")},
        "statePartitions": PARTITIONS,
        "executors": {"initial": 1, "cores": 1, "memory": "768m"},
    }
    if event_log:
        (work / "events").mkdir()
        spec["spark"] = {"conf": {"spark.eventLog.enabled": "true",
                                  "spark.eventLog.dir": str(work / "events")}}
    job = {"apiVersion": "stream-autoscaler.io/v1alpha1", "kind": "StreamJob",
           "metadata": {"name": "bench"}, "spec": spec}
    path = work / "job.yaml"
    path.write_text(yaml.safe_dump(job), encoding="utf-8")
    return path


def live(n: int) -> Callable[[RunnerStatus], bool]:
    """No action running and ``n`` executors live."""
    return lambda st: st.action is None and st.executors.live == n


def lag(st: RunnerStatus) -> float:
    return st.backlog.age_seconds or 0.0


def settled(r: Runner) -> float:
    """Wait for the prefill to be in state and the lag to settle; the lag level (s)."""
    r.wait("every key in state", lambda st: (st.last_committed_batch or 0) >= 3 and lag(st) < 8)
    seen = []
    for _ in range(12):  # 3 s of the steady level
        seen.append(lag(r.status()))
        time.sleep(0.25)
    return statistics.median(seen)


def restart(r: Runner, send: Callable[[], object], level: float) -> Kind:
    """Send one action; follow the lag until the action is done and the lag is back."""
    before = r.status().last_action
    send()
    peak, done = level, None
    deadline = time.monotonic() + SETTLE_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        st = r.status()
        peak = max(peak, lag(st))
        last = st.last_action
        if done is None and st.action is None and last is not None and (
                before is None or last.id != before.id):
            done = last
        if done is not None and lag(st) <= level + 1.0:
            break
        time.sleep(0.25)
    if done is None:
        raise RuntimeError("the action did not finish")
    return figures(done, peak - level)


def figures(a: ActionRecord, added: float) -> Kind:
    if str(a.state) != "succeeded":
        raise RuntimeError(f"{a.kind} failed: {a.error}")
    return Kind(request_to_first_commit_seconds=a.timings.get("first_commit"),
                lag_added_seconds=round(max(added, 0.0), 2), steps=dict(a.steps),
                timings=dict(a.timings))


def run_variant(tree: Path, master: str, work: Path, keys: int, rate: int,
                kinds: tuple[str, ...] = KINDS, event_log: bool = False,
                extra: tuple[str, ...] = ()) -> dict[str, Any]:
    work.mkdir(parents=True)
    job = write_job(work, keys, rate, event_log)
    out: dict[str, Any] = {}
    r = Runner(tree, job, master, work, "--executors", "3", *extra)
    level = settled(r)
    if "cap" in kinds:
        out["cap"] = restart(
            r, lambda: r.client.repartition(PARTITIONS, max_records_per_batch=CAP), level)
    if "respread" in kinds:
        for n in (1, 3):
            r.client.set_executors(n)
            r.wait(f"{n} executors", live(n))
            settled(r)
        level = settled(r)
        out["respread"] = restart(r, lambda: r.client.repartition(PARTITIONS), level)
    if "repartition" in kinds:
        level = settled(r)
        out["repartition"] = restart(r, lambda: r.client.repartition(2 * PARTITIONS), level)
    if "recovery" not in kinds:
        r.stop()
        return out
    level = settled(r)
    killed = r.kill()
    r2 = Runner(tree, job, master, work, "--executors", "3", *extra)
    st = r2.wait("the first commit after the recovery", lambda st: (
        st.last_committed_batch is not None and st.resumed_from_batch is not None
        and st.last_committed_batch > st.resumed_from_batch))
    peak = level
    first = time.monotonic() - killed
    deadline = time.monotonic() + SETTLE_TIMEOUT_SECONDS
    while time.monotonic() < deadline:  # the lag back to its level
        now = r2.status()
        peak = max(peak, lag(now))
        if lag(now) <= level + 1.0:
            break
        time.sleep(0.25)
    out["recovery"] = Kind(request_to_first_commit_seconds=round(first, 2),
                           lag_added_seconds=round(max(peak - level, 0.0), 2),
                           steps=dict(st.start_steps),
                           first_batch=(st.start_first_batch.to_wire()
                                        if st.start_first_batch else None))
    r2.stop()
    return out


def exactly_once(job: Path) -> bool:
    from pyspark.sql import SparkSession

    from contracts.manifests import load_job
    from operators.query.job import PROVIDER_KEY, ROCKSDB_PROVIDER
    from operators.verifier import verify

    spark = (SparkSession.builder.master("local[1]").appName("bench-restarts-verifier")
             .config("spark.ui.enabled", "false").config(PROVIDER_KEY, ROCKSDB_PROVIDER)
             .getOrCreate())
    try:
        result = verify(load_job(str(job)).spec, spark=spark)
    finally:
        spark.stop()
    print(f"  {job.parent.name}: {result.message}")
    return bool(result.ok)


def target(kind: str) -> float:
    if kind == "recovery":
        return RECOVERY_TARGET_SECONDS
    return 2 * TRIGGER_SECONDS + TARGET_SLACK_SECONDS[kind]


def down_seconds(k: Kind) -> float | None:
    """The stop -> the first commit: what the job did not commit (the runner's ``down`` timing;
    a revision without it: the request -> the first commit less the warm-up, if any)."""
    if "down" in k.timings:
        return k.timings["down"]
    if k.request_to_first_commit_seconds is None:
        return None
    return k.request_to_first_commit_seconds - k.timings.get("warmed", 0.0)


def report(results: dict[str, dict[str, Kind]], slo: float) -> list[str]:
    """Per kind and variant: request -> first commit, the stop -> first commit, the lag added;
    the targets beside them, and the last variant's steps."""
    variants = [v for v in VARIANTS if v in results]
    head = f"{'kind':<12} {'target s':>8}"
    for v in variants:
        head += f" | {v + ' req':>12} {'down':>6} {'lag+':>6}"
    lines = [head + f" | {'lag target':>10}  {variants[-1]} steps (s)"]
    for kind in KINDS:
        row = f"{kind:<12} {target(kind):>8.1f}"
        present = False
        for v in variants:
            k = results[v].get(kind)
            if k is None:
                row += f" | {'-':>12} {'-':>6} {'-':>6}"
                continue
            present = True
            req, down = k.request_to_first_commit_seconds, down_seconds(k)
            row += (f" | {req or 0:>12.1f} {down or 0:>6.1f} {k.lag_added_seconds or 0:>6.1f}")
        if not present:
            continue
        last = results[variants[-1]].get(kind) or Kind()
        steps = " ".join(f"{k}={v:.1f}" for k, v in last.steps.items())
        if last.first_batch:  # what the recovery's first commit ran
            fb = last.first_batch
            steps += (f" (first batch {fb['batchId']}: {fb['rows']} rows in {fb['seconds']} s"
                      f"{', replayed' if fb['replayed'] else ''})")
        lines.append(row + f" | {slo * LAG_TARGET_SHARE:>10.1f}  {steps}")
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", default=BASELINE_REVISION,
                    help="git revision of the baseline runner (default: the restart path before "
                         "step timings and the gap-aware stop)")
    ap.add_argument("--variants", default=",".join(VARIANTS),
                    help="which runners to run, comma-separated, in this order: baseline (the "
                         "--baseline revision), cold (this tree with --no-warm-executors), "
                         "current (this tree)")
    ap.add_argument("--kinds", default=",".join(KINDS),
                    help=f"which restarts to run, comma-separated, in the bench's order "
                         f"({', '.join(KINDS)})")
    ap.add_argument("--event-log", action="store_true",
                    help="keep Spark's event log of each runner under its scratch directory "
                         "(per-task figures of the batches around each restart)")
    ap.add_argument("--keys", type=int, default=100_000)
    ap.add_argument("--rate", type=int, default=600,
                    help="records/s after the prefill: below one half-core executor's capacity, "
                         "so the lag settles between restarts")
    ap.add_argument("--slo", type=float, default=30.0)
    ap.add_argument("--out", default=str(REPO / "out" / "bench-restarts"))
    args = ap.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    # a SIGTERM ends the run through the finally blocks: the worktree removed, the cluster down
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    from operators.query.cluster import MiniCluster

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="bench-restarts-"))
    variants = tuple(v for v in VARIANTS if v in args.variants.split(","))
    kinds = tuple(k for k in KINDS if k in args.kinds.split(","))
    if not variants or not kinds:
        ap.error(f"--variants names none of baseline, current; or --kinds none of {KINDS}")
    base_tree = scratch / "baseline-tree"
    if "baseline" in variants:
        subprocess.run(["git", "worktree", "add", "--detach", str(base_tree), args.baseline],
                       cwd=REPO, check=True, capture_output=True)
    results: dict[str, dict[str, Kind]] = {}
    ok: dict[str, bool] = {}
    try:
        with MiniCluster(workers=3, cores_per_worker=1, memory_per_worker="1g",
                         executor_cpus=0.5, log_dir=scratch / "cluster") as cluster:
            trees = {"baseline": base_tree, "cold": REPO, "current": REPO}
            for variant in variants:
                tree = trees[variant]
                extra = ("--no-warm-executors",) if variant == "cold" else ()
                started = time.monotonic()
                print(f"{variant}: {tree} ...", flush=True)
                results[variant] = run_variant(tree, cluster.master_url, scratch / variant,
                                               args.keys, args.rate, kinds, args.event_log,
                                               extra)
                print(f"{variant}: done in {time.monotonic() - started:.0f} s", flush=True)
        print("exactly once:")
        for variant in results:
            ok[variant] = exactly_once(scratch / variant / "job.yaml")
    finally:
        if "baseline" in variants:
            subprocess.run(["git", "worktree", "remove", "--force", str(base_tree)], cwd=REPO,
                           check=False, capture_output=True)
    doc = {
        "machine": {"cpus": os.cpu_count()}, "baseline": args.baseline, "keys": args.keys,
        "rate": args.rate, "trigger_seconds": TRIGGER_SECONDS, "slo_seconds": args.slo,
        "variants": {v: {"exactly_once": ok.get(v), "kinds": {
            k: {"trigger_seconds": TRIGGER_SECONDS, "slo_seconds": args.slo,
                "target_seconds": target(k), **asdict(kind)}
            for k, kind in kinds.items()}} for v, kinds in results.items()},
    }
    (out / "restarts.json").write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    print("\n".join(report(results, args.slo)))
    print(f"wrote {out / 'restarts.json'} (scratch: {scratch})")
    return 0 if all(ok.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
