"""``make kind-burst``: a burst StreamJob on a kind cluster of several nodes, watched and reported.

What it does, on the cluster ``hack/kind/up.sh`` made (the chart installed, the image loaded):

1. the checkpoint volume: a ReadWriteMany PersistentVolume over the host directory every worker
   mounts (``KIND_SHARED_DIR``, hack/kind/lib.sh), bound to the claim the sample jobs name — so a
   driver or an executor on any worker reads and writes the same checkpoint, and it outlives any
   node;
2. a ScalingPolicy and a burst StreamJob (a keyed count, a files sink on the volume, CPU-limited
   executors so that scaling shows on a small machine);
3. ``kubectl get streamjobs --watch`` printed live while the burst runs; every
   :data:`SAMPLE_SECONDS` the runner's own ``/metrics`` (through the API server's service proxy),
   the StreamJob's status and the job's pods are sampled (:class:`Sampler`);
4. once the bursts have played, the job has caught up and the light tail after them has been
   scaled in (:class:`ScaleIns`: each scale-in as the runner did it, between two batches or not,
   and the tasks that failed around it), the StreamJob is deleted (the runner stops at a batch
   boundary) and the verifier reads the volume's directory on the host: every record the
   checkpoint committed counted exactly once;
5. ``out/kind-burst/``: ``summary.json`` (``exactly_once``, ``nodes``, ``peak_executors``,
   ``actions``, ``slo_violation_seconds``, ...), ``timeline.csv`` and ``timeline.png`` (the demo's
   plot: rates, lag against the SLO, executors and partitions, each action with its reason),
   ``actions.json`` (each decision the controller recorded, with its reason and message).

With ``--kill-controller`` (:class:`ControllerKill`) the leading controller pod is force-deleted
while the first action is in flight, and ``controller_kill`` names the new leader and what the
runner recorded of that action (started once, and how it ended). With ``--lose-worker``
(:class:`NodeLoss`) a worker holding executors and not the driver is
paused once a scale-out has run, and the summary's ``node_loss`` says when the node was
seen NotReady, when the lost executors' pods were gone and their first replacement ran, when the
lag was back under the SLO, and the controller's ExecutorsLost Event naming the node. With
``--kill-executor`` (:class:`ExecutorKill`) one executor pod is deleted in the second burst and
``executor_kill`` says when its pod was gone and a replacement ran. With ``--lose-driver-node``
(:class:`DriverNodeLoss`) the driver's node crashes once those have recovered (a lost worker
comes back first) and a scale-in has run, and ``driver_node_loss`` says when the driver ran
again on the other worker, its first commit, and the controller's DriverNodeLost Event.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import structlog
import yaml

from app.demo_report import fill_arrivals, plot, summarize, trace_lead, write_timeline
from app.errors import KindBurstError
from app.kind_burst_failures import ControllerKill, DriverNodeLoss, ExecutorKill, NodeLoss
from app.kind_burst_job import (
    BURSTS_SECONDS,
    JOB,
    NAMESPACE,
    RUNNER_UID,
    SHARED_PATH,
    SLO_SECONDS,
    TRACE,
    job_doc,
    policy_doc,
    volume_docs,
)
from app.kind_burst_watch import (
    Kubectl,
    Sampler,
    ScaleIns,
    action_line,
    actions_of,
    job_events,
    rpc_secret_in_env,
)
from contracts.history import ScalingHistory
from contracts.trace import load_trace

SAMPLE_SECONDS = 2.0
CAUGHT_UP_LAG_SECONDS = 6.0
"""A backlog no older than three 2 s triggers is caught up."""

MIN_EXECUTORS = int(policy_doc()["spec"]["executors"]["min"])
"""The policy's floor: a job there has nothing left to scale in."""
MAX_WAIT_SECONDS = 1200.0
"""The whole run's bound by default (``--max-wait``): the trace, the start of the job, slow
days."""


def verify_on_host(shared: Path) -> dict[str, Any]:
    """The verifier with the host's pyspark over the volume's directory (the files the pods
    wrote), in its own process: what the checkpoint committed, every key counted once."""
    doc = job_doc(str(shared))
    doc["spec"]["checkpoint"] = {"location": str(shared / JOB / "checkpoint")}
    path = shared / JOB / "verify-job.yaml"
    path.write_text(yaml.safe_dump(doc))
    code = (
        "import json, sys\nfrom app.demo_job import verify_exactly_once\n"
        "from contracts.manifests import load_job\n"
        "print(json.dumps(verify_exactly_once(load_job(sys.argv[1]).spec), default=str))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=900
    )
    if out.returncode != 0:
        raise KindBurstError(f"the verifier failed: {out.stderr.strip()[-2000:]}")
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def scaled_in(status: dict[str, Any], scale_ins: ScaleIns, t0: float,
              driver_lost_at: float | None = None) -> bool:
    """The job is back to what the quiet needs: at the policy's minimum, or scaled in (the
    runner's record read) since its last other action (a run that never acted has nothing to
    scale in). The bursts end in a light tail, so the engine scales in once its stabilization
    window has passed; a run that ended before would report half a burst.

    With the driver's node lost (``driver_lost_at``, unix time), only the actions before the
    loss count: the loss comes once a scale-in has run (:class:`DriverNodeLoss`), and the
    recovery sizes the job from what status last saw, so waiting for the recovered job to
    scale in again would wait out another stabilization window for nothing the run reports
    (held by tests/unit/app/test_kind_burst.py::
    test_a_scale_in_is_read_from_the_runner_that_did_it_with_the_tasks_failed_around_it)."""
    history = ScalingHistory.model_validate(status.get("history") or {})
    others = [e.time - t0 for e in history.entries
              if e.kind == "action" and e.reason != "ScaleIn"
              and (driver_lost_at is None or e.time < driver_lost_at)]
    target = (status.get("executors") or {}).get("target")
    return not others or (target == MIN_EXECUTORS and not scale_ins.pending) or scale_ins.after(
        max(others))


def run(args: argparse.Namespace) -> int:
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    shared = Path(args.shared)
    kubectl = Kubectl(args.context, args.kubectl)
    nodes = kubectl.json("get", "nodes")["items"]
    workers = [
        n["metadata"]["name"]
        for n in nodes
        if "node-role.kubernetes.io/control-plane" not in n["metadata"]["labels"]
    ]
    print(f"kind-burst: {len(nodes)} nodes ({len(workers)} workers: {', '.join(workers)})")
    # a fresh run: the last run's job, checkpoint and output go
    kubectl.run("delete", "streamjob", JOB, "-n", NAMESPACE, "--ignore-not-found", "--timeout=180s")
    work = shared / JOB
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    (work / "trace.csv").write_text(TRACE)
    for p in (shared, work, work / "trace.csv"):
        os.chown(p, RUNNER_UID, RUNNER_UID)
    kubectl.apply(volume_docs())
    kubectl.apply([policy_doc(), job_doc(SHARED_PATH)])
    print(f"kind-burst: applied StreamJob {NAMESPACE}/{JOB}; `kubectl get streamjobs --watch`:")
    watch = subprocess.Popen(
        [args.kubectl, "--context", args.context, "get", "streamjobs", "-n", NAMESPACE, "--watch"]
    )
    sampler = Sampler(kubectl)
    scale_ins = ScaleIns(kubectl)
    leader_kill = ControllerKill(kubectl) if args.kill_controller else None
    rpc_secret: set[str] = set()
    loss = NodeLoss(comes_back=args.lose_driver_node) if args.lose_worker else None
    kill = ExecutorKill(kubectl, loss) if args.kill_executor else None
    crash = DriverNodeLoss(kubectl, loss, kill, scale_ins) if args.lose_driver_node else None
    status: dict[str, Any] = {}
    started: float | None = None
    caught_up = True
    try:
        deadline = time.monotonic() + args.max_wait
        while time.monotonic() < deadline:
            status = sampler.sample() or {}
            scale_ins.step(sampler, status)
            rpc_secret.update(rpc_secret_in_env(sampler.pods))
            if leader_kill is not None:
                leader_kill.step(sampler, status)
            if loss is not None:
                loss.step(sampler, status, kubectl)
            if kill is not None:
                kill.step(sampler, status)
            if crash is not None:
                crash.step(sampler, status)
            if started is None and status.get("lastCommittedBatch") is not None:
                started = time.monotonic()
            if started is not None and time.monotonic() - started > BURSTS_SECONDS:
                lag = sampler.rows[-1].lag_seconds
                # the failures asked for have happened (and the driver's node loss recovered):
                # a run that ended before them would report a loss it never had
                failures_done = (
                    (leader_kill is None or leader_kill.record is not None)
                    and (loss is None or loss.node is not None)
                    and (kill is None or kill.pod is not None)
                    and (crash is None or "first_commit" in crash.marks)
                )
                if (
                    status.get("intent") is None
                    and lag is not None
                    and lag <= CAUGHT_UP_LAG_SECONDS
                    and failures_done
                    and scaled_in(status, scale_ins, sampler.t0,
                                  crash.lost_unix if crash is not None and crash.node else None)
                ):
                    break
            time.sleep(SAMPLE_SECONDS)
        else:  # reported, not raised: what happened until then is the finding
            caught_up = False
            print(
                f"kind-burst: the job did not play its trace and catch up in "
                f"{args.max_wait:.0f} s",
                file=sys.stderr,
            )
        table = kubectl.run("get", "streamjobs", "-n", NAMESPACE)
        events = job_events(kubectl)
        for lost in (loss, crash):
            if lost is not None:
                lost.restore()  # its pods then end, so the StreamJob's deletion can finish
        kubectl.run("delete", "streamjob", JOB, "-n", NAMESPACE, "--timeout=180s")
    finally:
        watch.terminate()
        watch.wait(10)
        for lost in (loss, crash):
            if lost is not None:
                lost.restore()
    print("kind-burst: StreamJob deleted (stopped at a batch boundary); verifying on the host")
    verdict = verify_on_host(shared)
    actions = actions_of(status, events, sampler.t0)
    lead = trace_lead(str(shared / JOB / "checkpoint"), sampler.t0)
    if lead is not None:  # what arrived, on the burst source's own clock
        fill_arrivals(sampler.rows, load_trace(str(shared / JOB / "trace.csv")), lead)
    summary = summarize(sampler.rows, SLO_SECONDS, actions)
    summary.update(
        {
            "exactly_once": bool(verdict.get("exactly_once")),
            "verifier": verdict,
            "nodes": {
                "cluster": [n["metadata"]["name"] for n in nodes],
                "workers": workers,
                "driver": sorted(sampler.nodes["driver"]),
                "executors": sorted(sampler.nodes["executor"]),
            },
            "peak_executors": sampler.peak_executors,
            "actions": [action_line(a) for a in actions],
            "table": table,
        }
    )
    summary["caught_up"] = caught_up
    summary["scale_ins"] = scale_ins.done
    summary["rpc_secret_in_pod_env"] = sorted(rpc_secret)
    if leader_kill is not None:
        summary["controller_kill"] = leader_kill.figures()
    summary["unobserved_seconds"] = round(sampler.unobserved_seconds, 1)
    if loss is not None:
        summary["node_loss"] = loss.figures(events)
    if kill is not None:
        summary["executor_kill"] = kill.figures()
    if crash is not None:
        summary["driver_node_loss"] = crash.figures(events)
    write_timeline(out_dir / "timeline.csv", sampler.rows)
    plot(
        out_dir / "timeline.png",
        sampler.rows,
        SLO_SECONDS,
        f"kind-burst: {len(nodes)} nodes, peak {sampler.peak_executors} executors",
        actions,
    )
    (out_dir / "actions.json").write_text(json.dumps(actions, indent=1))
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
    print(
        json.dumps(
            {
                k: summary[k]
                for k in (
                    "exactly_once",
                    "nodes",
                    "peak_executors",
                    "actions",
                    "slo_violation_seconds",
                )
            },
            indent=1,
        )
    )
    print(f"kind-burst: report in {out_dir}/")
    return 0 if summary["exactly_once"] and caught_up else 1


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="kind-burst", description=__doc__.split("\n")[0])
    p.add_argument("--out", default="out/kind-burst")
    p.add_argument("--context", default="kind-stream-autoscaler")
    p.add_argument("--kubectl", default="kubectl")
    p.add_argument("--shared", required=True, help="the host directory the workers mount")
    p.add_argument(
        "--max-wait",
        type=float,
        default=MAX_WAIT_SECONDS,
        help="seconds the trace, the failures and the catch-up may take before the run ends "
        f"as not caught up (default {MAX_WAIT_SECONDS:.0f})",
    )
    p.add_argument(
        "--kill-controller",
        action="store_true",
        help="force-delete the leading controller pod while the first action is in flight",
    )
    p.add_argument(
        "--lose-worker",
        action="store_true",
        help="pause the worker holding executors (not the driver) once they run on both",
    )
    p.add_argument(
        "--kill-executor",
        action="store_true",
        help="delete one executor pod in the second burst (after --lose-worker's replacement)",
    )
    p.add_argument(
        "--lose-driver-node",
        action="store_true",
        help="crash the driver's node in the second burst, or in the tail when the quiet between "
        "the bursts was not scaled in (after the other failures recovered and a scale-in; "
        "with --lose-worker that worker comes back first)",
    )
    args = p.parse_args(argv)
    # the scrape's warnings (the driver not up yet, a restart) would break the live table; an
    # unreadable sample is counted in the summary's unobserved_seconds instead
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.ERROR))
    try:
        return run(args)
    except KindBurstError as e:
        print(f"kind-burst: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
