"""The burst story on real pods: the chart's controller in pods (2
replicas, leader election), a managed StreamJob whose driver and executors are real pods on the
test bed's node with CPU-limited executors, the checkpoint and the sink on a shared local
PersistentVolume; the burst -> executor pods appear -> scale-in at a batch boundary with no
failed task -> the driver pod killed during a burst -> RecoverFromFailure from the checkpoint on
the volume -> every record exactly once (the verifier on the host over the volume's directory).
The leading controller pod is killed during an action: the standby finishes it, no step twice.

Every wait is bounded and names what did not happen, with the pods, the controller's log tail
and the runner's status. Figures are printed and written to ``burst-pods-figures.json``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration.k8s.controller_env import apply, status
from tests.integration.k8s.k8s_tier import REPO, Tool
from tests.integration.node.conftest import RealNode
from tests.integration.node.pods import (
    EXECUTORS,
    Story,
    action_figures,
    executors_running,
    failed_tasks,
    install,
    kill_driver_and_recover,
    leader,
    no_rpc_secret_in_pods,
    overlay_values,
    pod_start,
    policy,
    runner_status,
    uninstall,
)

pytestmark = [pytest.mark.k8s, pytest.mark.slow]

JOB = "burst-pods"
MOUNT = "/data"

TRACE = ("t,input_rate\n0,1500\n20,45000\n100,400\n170,12000\n250,400\n320,12000\n400,400\n"
         "470,12000\n550,400\n700,0\n100000,0\n")
"""Records/s by second since the query started: a burst (scale-out) of 1.5x what one 0.5-CPU
executor processed on the fastest day measured (~30,000/s), then lulls of 70 s (the 30 s
stabilization window, the 16 s cooldown and a 4 s evaluation, with room: scale-in) between bursts of
12,000/s every 150 s, and a 150 s tail of light load. The driver pod is killed in the first burst
after the scale-in, so the story waits at most a lull for it. On a loaded machine the controller may
act on the second burst only (seen in CI: the first action came 206 s after the first batch), and
the story still holds: the scale-in then comes in a later lull. A scale-in is never deferred here
for bursts that recur: that needs three scale-outs on record (controller/core/recurrence.py), and
the driver is killed after the first. The first burst was 25,000/s until one executor kept up with
it on a fast day (lag <= 2.4 s, busy under `utilization.high`, so the engine rightly held and no
action came in 420 s); a burst the engine may hold on proves nothing. The tail keeps records
arriving after any recovery, so "a batch after the restart" always has data to commit (in CI a kill
in the last burst recovered after the trace had ended: nothing arrived, no batch could follow, and
the test waited for none). The story ends once the recovered job has caught up, wherever the trace
is."""

MAX_RECORDS_PER_BATCH = 200_000
"""The job's admission cap, as every sample sets one (Spark's maxOffsetsPerTrigger for Kafka):
a bound on one batch (~7 s for one 0.5-CPU executor, which processed ~30,000 records/s here),
far above what arrives in one trigger at the bursts' rates (45,000/s x 2 s), so it binds only on
a batch planned after a long stall."""

CAUGHT_UP_SECONDS = 6.0
"""A backlog no older than this (three 2 s triggers) is caught up: what waits is the batch in
flight and the next."""

POLICY = policy("pods")


def job_doc(claim: str) -> dict[str, Any]:
    return {
        "apiVersion": "stream-autoscaler.io/v1alpha1",
        "kind": "StreamJob",
        "metadata": {"name": JOB},
        "spec": {
            "policyRef": {"name": "pods"},
            "source": {"type": "burst", "trace": f"{MOUNT}/trace.csv", "keys": 20000,
                       "partitions": 4, "maxRecordsPerBatch": MAX_RECORDS_PER_BATCH},
            "pipeline": [{"type": "aggregate", "name": "count-by-key", "keys": ["key"],
                          "aggregations": [{"fn": "count"},
                                           {"fn": "sum", "column": "value", "as": "total"}]}],
            "sink": {"type": "files", "path": f"{MOUNT}/out"},
            "trigger": {"intervalSeconds": 2},
            "checkpoint": {"location": f"{MOUNT}/checkpoint",
                           "volume": {"claimName": claim, "mountPath": MOUNT}},
            "statePartitions": 2,
            "executors": EXECUTORS,
        },
    }


def test_burst_story_on_real_pods(
    kubectl: Tool, helm: Tool, crds: list[str], real_node: RealNode, image: str, ns: str,
    shared_volume: tuple[str, Path], tmp_path: Path,
) -> None:
    claim, host = shared_volume
    (host / "trace.csv").write_text(TRACE)
    (host / "trace.csv").chmod(0o644)
    story = Story(kubectl, ns, tmp_path, JOB)
    release = "sa"
    figures: dict[str, Any] = {}
    watch_log = tmp_path / "watch.txt"
    with watch_log.open("w") as out:  # the child keeps its own descriptor
        watch = subprocess.Popen(
            [str(kubectl.path), "get", "streamjobs", "-n", ns, "--watch"],
            stdout=out, stderr=subprocess.STDOUT, env=kubectl.env, text=True)
    try:
        # 1. the controller in pods
        install(helm, story, overlay_values(real_node, ns, tmp_path), release)
        ctl = story.controllers()
        assert len(ctl) == 2 and all(p["spec"]["nodeName"] == real_node.name for p in ctl), ctl
        first_leader = story.wait("a controller leads", lambda: leader(story), 60)
        # 2-3. the managed job
        apply(kubectl, POLICY, ns)
        apply(kubectl, job_doc(claim), ns)
        created = time.monotonic()
        drv = story.wait("the driver pod runs", lambda: next(
            (p for p in story.pods("spark-role=driver")
             if p["status"].get("phase") == "Running"), None), 120)
        figures["driver_pod_start_s"] = pod_start(drv)
        story.wait("an executor pod runs", lambda: executors_running(story) >= 1, 180)
        no_rpc_secret_in_pods(story)
        story.wait("the first committed batch", lambda: runner_status(story).last_committed_batch
                   is not None, 240)
        figures["streamjob_to_first_batch_s"] = round(time.monotonic() - created, 1)
        # the burst: a scale-out and/or repartition; kill the leading controller in the action
        st = story.wait("an action in flight (status.intent)",
                        lambda: status(kubectl, ns, JOB).get("intent"), 420, every=0.5)
        lead = leader(story)
        kubectl("delete", "pod", lead, "-n", story.ctl_ns, "--grace-period=0", "--force",
                "--wait=false")
        story.mark(f"killed the leading controller {lead} during {st.get('action')}")
        story.wait("the standby finishes the action", lambda: "intent" not in status(
            kubectl, ns, JOB), 240)
        new_leader = leader(story)
        assert new_leader and new_leader != lead, (first_leader, lead, new_leader)
        recent = runner_status(story).recent_actions
        assert [a.id for a in recent].count(st["actionId"]) == 1, recent
        done = next(a for a in recent if a.id == st["actionId"])
        assert str(done.state) == "succeeded", done
        figures["killed_controller_action"] = action_figures(done)
        story.wait("2 or more executor pods (scale-out)", lambda: executors_running(story) >= 2,
                   300)
        figures["executors_max_pods"] = executors_running(story)
        # 4. the lull: a graceful scale-in
        story.wait("a scale-in", lambda: "ScaleIn" in story.reasons(), 360, every=2)
        story.wait("the scale-in done", lambda: "intent" not in status(kubectl, ns, JOB), 120)
        scale_in = [a for a in runner_status(story).recent_actions
                    if str(a.kind) == "executors" and a.result.get("killed")]
        assert scale_in and scale_in[-1].result.get("graceful") == "batch-boundary", scale_in
        figures["scale_in"] = action_figures(scale_in[-1])
        figures["all_actions"] = [action_figures(a) for a in runner_status(story).recent_actions]
        failed = failed_tasks(story)
        figures["failed_tasks_after_scale_in"] = failed
        assert failed == 0, f"{failed} task(s) failed by the scale-in"
        # 5. the next burst after the scale-in: kill the driver pod
        story.wait("the next burst",
                   lambda: (runner_status(story).rates.arrival_rows_per_second or 0) > 4000,
                   420, every=2)
        kill_driver_and_recover(story, figures)
        # the recovered job catches up, then stops at a batch boundary: the verifier checks
        # what the checkpoint committed, wherever the trace is (its tail is slack for a slow
        # machine, not something to wait for: ~400 s of the tier's time)
        story.wait("caught up after the recovery", lambda: (
            lambda r: r.backlog.records == 0 or (r.backlog.age_seconds is not None
                                                 and r.backlog.age_seconds <= CAUGHT_UP_SECONDS)
        )(runner_status(story)), 300, every=2)
        figures["table"] = kubectl("get", "streamjobs", "-n", ns).stdout
        kubectl("delete", "sj", JOB, "-n", ns, "--timeout=180s")
        story.mark("StreamJob deleted (stopped at a batch boundary)")
    finally:
        watch.terminate()
        watch.wait(10)
        figures["marks"] = story.marks
        figures["events"] = story.reasons()
        figures["watch"] = watch_log.read_text()[-4000:]
        print(json.dumps(figures, indent=1, default=str))
        (REPO / "out").mkdir(exist_ok=True)
        (REPO / "out" / "burst-pods-figures.json").write_text(
            json.dumps(figures, indent=1, default=str))
        uninstall(helm, story, release)
    got = figures["events"]
    assert "RecoverFromFailure" in got and ("ScaleOut" in got or "RepartitionStateBound" in got)
    verdict = verify_on_host(host)
    figures["verdict"] = verdict
    print(f"exactly once: {verdict}")
    assert verdict["exactly_once"] is True, verdict


VERIFY = """
import json, sys
from app.demo_job import verify_exactly_once
from contracts.manifests import load_job
print(json.dumps(verify_exactly_once(load_job(sys.argv[1]).spec), default=str))
"""


def verify_on_host(host: Path) -> dict[str, Any]:
    """The verifier with the host's pyspark over the volume's directory (same files the pods
    wrote), in its own process."""
    doc = job_doc("unused")
    spec = doc["spec"]
    spec["source"]["trace"] = str(host / "trace.csv")
    spec["sink"]["path"] = str(host / "out")
    spec["checkpoint"] = {"location": str(host / "checkpoint")}
    doc["metadata"]["namespace"] = "default"
    job = host / "verify-job.yaml"  # removed with the volume
    job.write_text(yaml.safe_dump(doc))
    out = subprocess.run([sys.executable, "-c", VERIFY, str(job)], capture_output=True,
                         text=True, timeout=600, cwd=REPO)
    assert out.returncode == 0, out.stderr[-3000:]
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))
