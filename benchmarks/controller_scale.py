"""1,000 attached StreamJobs against simulated runners, on the real API server: how fast and how
big the controller is.

    .venv/bin/python benchmarks/controller_scale.py [--jobs 1000] [--duration 180] [--workers 4]
        [--out out/bench-controller]

Starts (or reuses) the loopback test bed, 1,000 simulated runners behind one loopback server
(operators/testing/fake_runner.py), creates the StreamJobs (attached to them, bundled `default`
policy: an evaluation every 10 s), runs `stream-autoscaler controller` as its own process and
measures, after a warm-up of one interval:

* evaluation time per pass (collect from the runner, decide, write status), p50/p99, from the
  controller's decision log;
* timer lateness: the gap between a job's consecutive evaluations minus the policy's interval,
  p50/p99 (how late the per-job timer fires under load);
* controller RSS (peak and last) and CPU (cores used), from /proc.

Targets: p99 <= 1 s, RSS <= 300 MB. Prints a table and writes summary.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "hack" / "testbed"))

from operators.testing.fake_runner import FakeRunners  # noqa: E402

NAMESPACE = "bench-scale"
TOKEN = "bench-token"
TICKS = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


def kubectl(env: dict[str, str], *args: str, input: str | None = None) -> str:
    out = subprocess.run([env["KUBECTL"], *args], input=input, capture_output=True, text=True,
                         env=env, timeout=600)
    if out.returncode != 0:
        raise RuntimeError(f"kubectl {' '.join(args)}: {out.stderr.strip()}")
    return out.stdout


def proc_sample(pid: int) -> tuple[float, int]:
    """(CPU seconds so far, RSS bytes) of one process."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / TICKS
    rss = int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE
    return cpu, rss


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, round(q * (len(values) - 1)))]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--jobs", type=int, default=1000)
    p.add_argument("--duration", type=float, default=180.0, help="measured seconds")
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--out", default=str(REPO / "out" / "bench-controller"))
    args = p.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    import testbed as tb

    bed = tb.ensure_up(user=os.getpid())
    env = {**os.environ, **bed.env, "KUBECTL": str(bed.tools["kubectl"])}
    kubectl(env, "apply", "--server-side", "--force-conflicts", "-f", str(REPO / "k8s" / "crds"))
    release_jobs(bed.env["KUBECONFIG"])
    kubectl(env, "delete", "namespace", NAMESPACE, "--ignore-not-found", "--wait=true",
            "--timeout=300s")
    kubectl(env, "create", "namespace", NAMESPACE)
    kubectl(env, "apply", "-n", NAMESPACE, "-f", str(REPO / "policies" / "default.yaml"))
    kubectl(env, "create", "secret", "generic", "runner-token", "-n", NAMESPACE,
            f"--from-literal=token={TOKEN}")
    kubectl(env, "label", "secret", "runner-token", "-n", NAMESPACE,
            "stream-autoscaler.io/runner-token=true")
    names = [f"job-{i:04d}" for i in range(args.jobs)]
    runners = FakeRunners(names, token=TOKEN).start()
    proc = None
    try:
        base = yaml.safe_load((REPO / "k8s" / "samples" / "streamjob-burst.yaml").read_text())
        items = []
        for n in names:
            doc = json.loads(json.dumps(base))
            doc["metadata"] = {"name": n, "namespace": NAMESPACE}
            doc["spec"]["attach"] = {"controlUrl": runners.url(n),
                                     "metricsUrl": runners.metrics_url(n),
                                     "tokenSecretRef": {"name": "runner-token"}}
            items.append(doc)
        t0 = time.monotonic()
        for i in range(0, len(items), 250):
            kubectl(env, "apply", "--server-side", "-f", "-",
                    input=json.dumps({"apiVersion": "v1", "kind": "List",
                                      "items": items[i:i + 250]}))
        created = time.monotonic() - t0
        print(f"created {args.jobs} StreamJobs in {created:.1f} s", flush=True)

        log_path = out / "controller.log"
        log = open(log_path, "wb")  # noqa: SIM115
        proc = subprocess.Popen(
            [sys.executable, "-m", "app.cli", "controller", "--namespace", NAMESPACE,
             "--workers", str(args.workers), "--bind", "127.0.0.1", "--health-port", "0",
             "--metrics-port", "0", "--attach-allow-host", "127.0.0.1"],
            stdout=log, stderr=subprocess.STDOUT, cwd=REPO,
            env={**env, "KUBECONFIG": bed.env["KUBECONFIG"], "PYTHONPATH": str(REPO)})
        interval = 10.0
        warm = time.time() + interval * 2
        time.sleep(interval * 2)
        cpu0, _ = proc_sample(proc.pid)
        rss_peak, rss = 0, 0
        t_start = time.time()
        while time.time() - t_start < args.duration:
            if proc.poll() is not None:
                raise RuntimeError(f"controller exited {proc.returncode}; see {log_path}")
            _, rss = proc_sample(proc.pid)
            rss_peak = max(rss_peak, rss)
            time.sleep(1.0)
        cpu1, _ = proc_sample(proc.pid)
        t_end = time.time()
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=60)
        runners.stop()
        release_jobs(bed.env["KUBECONFIG"])
        kubectl(env, "delete", "namespace", NAMESPACE, "--wait=false")
        if not os.environ.get("TESTBED_KEEP"):
            tb.release(os.getpid())

    passes: list[float] = []
    last_at: dict[str, tuple[float, str]] = {}
    lateness: list[float] = []
    jobs_seen: set[str] = set()
    for line in log_path.read_text(errors="replace").splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if rec.get("event") != "decision":
            continue
        at = _ts(rec["timestamp"])
        job = rec["job"]
        if warm <= at <= t_end:
            passes.append(float(rec["ms"]) / 1000)
            jobs_seen.add(job)
            # after an action the job is followed every 2 s until it ends, then evaluated on
            # its interval again: only hold -> next gaps measure the timer
            if job in last_at and last_at[job][1] == "hold":
                lateness.append(max(0.0, at - last_at[job][0] - interval))
        last_at[job] = (at, rec.get("action", "hold"))
    measured = t_end - t_start
    summary: dict[str, Any] = {
        "jobs": args.jobs,
        "workers": args.workers,
        "measured_seconds": round(measured, 1),
        "evaluations": len(passes),
        "evaluations_per_second": round(len(passes) / measured, 1),
        "jobs_evaluated": len(jobs_seen),
        "evaluation_p50_seconds": round(pct(passes, 0.5), 4),
        "evaluation_p99_seconds": round(pct(passes, 0.99), 4),
        "timer_lateness_p50_seconds": round(pct(lateness, 0.5), 3),
        "timer_lateness_p99_seconds": round(pct(lateness, 0.99), 3),
        "rss_peak_mb": round(rss_peak / 2**20, 1),
        "rss_last_mb": round(rss / 2**20, 1),
        "cpu_cores": round((cpu1 - cpu0) / measured, 2),
        "create_seconds": round(created, 1),
        "targets": {"p99_le_1s": pct(passes, 0.99) <= 1.0, "rss_le_300mb": rss_peak <= 300 * 2**20},
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    width = max(len(k) for k in summary)
    for k, v in summary.items():
        print(f"{k:<{width}}  {v}")
    print(f"mean evaluation {statistics.fmean(passes):.4f} s" if passes else "no evaluations")
    return 0


def release_jobs(kubeconfig: str) -> None:
    """Removes our finalizer from every job of the benchmark namespace (no controller runs now
    to stop their runners, and the simulated runners are gone), so the namespace can go."""
    from kubernetes import client, config

    api = client.CustomObjectsApi(config.new_client_from_config(kubeconfig))  # type: ignore[no-untyped-call]
    try:
        listed: Any = api.list_namespaced_custom_object(
            "stream-autoscaler.io", "v1alpha1", NAMESPACE, "streamjobs")
        jobs = listed["items"]
    except client.ApiException as e:
        if e.status == 404:
            return
        raise
    for job in jobs:
        if job["metadata"].get("finalizers"):
            api.patch_namespaced_custom_object(
                "stream-autoscaler.io", "v1alpha1", NAMESPACE, "streamjobs",
                job["metadata"]["name"], {"metadata": {"finalizers": None}},
                _content_type="application/merge-patch+json")


def _ts(iso: str) -> float:
    import datetime as dt

    return dt.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


if __name__ == "__main__":
    sys.exit(main())
