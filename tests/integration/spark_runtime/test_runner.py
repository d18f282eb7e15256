"""The runner as a user runs it: a subprocess on a real standalone cluster, driven over HTTP.

Timings of every action are printed (``-s``) and recorded in docs/runner.md.
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

from contracts.manifests import load_job
from operators import state

from .conftest import REPO, write_job
from .jvm_archive_check import assert_the_jvms_map_the_installs_archive, without_the_lanes_archive

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def _verify(job_path: Path, spark: Any) -> Any:
    from operators.verifier import verify

    result = verify(load_job(str(job_path)).spec, spark=spark)
    assert result.ok, result.message
    return result


def _batches_after(runner: Any, batch: int, n: int = 2) -> dict[str, Any]:
    return runner.wait(lambda s: (s["lastCommittedBatch"] or -1) >= batch + n, 120,
                       f"{n} batches after {batch}")


def _records_per_batch(cp: Path, after: int) -> dict[int, int]:
    """Records each batch after ``after`` read, from the burst source's offsets log."""
    out: dict[int, int] = {}
    prev = None
    for b in state.checkpoint.batches(cp / "offsets"):
        _, sources = state.checkpoint.read_offsets(cp, b)
        offset = int(sources[0]["offset"])
        if prev is not None and b > after:
            out[b] = offset - prev
        prev = offset
    return out


CAP = 1_500
"""An admission cap below the 2,000 records/s the job's source delivers: every batch the resumed
query plans reads it exactly, as long as the pile of its downtime lasts."""


def test_scale_and_repartition_through_the_endpoint(start_runner, tmp_path, local_spark):
    job = write_job(tmp_path / "job", partitions=4)
    r = start_runner(job)
    assert r.call("GET", "/healthz")[0] == 200
    assert r.call("GET", "/status", token="wrong")[0] == 401
    assert r.call("POST", "/executors", {"target": 2}, token="wrong")[0] == 401
    assert r.call("POST", "/executors", {"target": "three"})[0] == 400
    assert r.call("POST", "/repartition", {})[1]["field"] == "partitions"
    st = _batches_after(r, 0, 1)
    assert st["executors"]["live"] == 1 and st["partitions"] == 4

    # 1 -> 3: a conflicting request meanwhile gets 409 with the phase.
    code, resp = r.call("POST", "/executors", {"target": 3})
    assert code == 202
    code, conflict = r.call("POST", "/repartition", {"partitions": 8})
    assert code == 409 and conflict["phase"] == "Scaling"
    up = r.wait(lambda s: (s.get("lastAction") or {}).get("id") == resp["action"], 180, "1->3")
    act = up["lastAction"]
    print("scale 1->3", json.dumps(act["timings"]))
    assert act["state"] == "succeeded", act
    assert up["executors"]["live"] == 3 and len(act["result"]["added"]) == 2
    assert "first_task" in act["timings"], "no task ran on a new executor"
    # Where tasks run: every new executor gets tasks (the read stage's, at least; stateful
    # tasks stay with the executor holding their state until a repartition).
    st = r.wait(lambda s: all(e["total_tasks"] > 0 for e in s["executors"]["list"]), 90,
                "tasks on every executor")
    print("tasks per executor", {e["id"]: e["total_tasks"] for e in st["executors"]["list"]},
          "stateful tasks by executor", st["statefulTasksByExecutor"])
    assert 'stream_autoscaler_executors{job="rt"} 3.0' in r.metrics()
    # The new executors are warmed beside the query (Python workers, the state store, code):
    # both of them, each having run tasks of both warm-ups, while the query kept committing.
    before = st["lastCommittedBatch"]
    st = r.wait(lambda s: set(act["result"]["added"]) <= set(s["warmExecutors"]), 180,
                "the new executors warmed")
    print("warm-up", st["lastWarmup"])
    assert sorted(st["lastWarmup"]["warmed"]) == sorted(act["result"]["added"]), st["lastWarmup"]
    assert "cold" not in st["lastWarmup"] and "error" not in st["lastWarmup"], st["lastWarmup"]
    assert st["phase"] == "Running" and st["lastCommittedBatch"] > before, st

    # 3 -> 1: kills the two executors holding the least state.
    down = r.action("/executors", {"target": 1})
    print("scale 3->1", json.dumps(down["timings"]), down["result"])
    assert down["state"] == "succeeded" and len(down["result"]["killed"]) == 2
    assert r.status()["executors"]["live"] == 1

    # 4 -> 8 -> 2 while the job runs; each verified from the offsets log and the row total.
    for n in (8, 2):
        act = r.action("/repartition", {"partitions": n})
        print(f"repartition ->{n}", json.dumps(act["timings"]), json.dumps(act["steps"]),
              act["result"])
        assert act["state"] == "succeeded", act
        assert act["result"]["rows_before"] == act["result"]["rows_after"]
        # each step of the move on its own, adding up to no more than the whole
        steps = act["steps"]
        assert {"stop_wait", "snapshot", "count_rows", "rewrite", "verify", "query_start",
                "first_commit"} <= set(steps), steps
        assert all(v >= 0 for v in steps.values()), steps
        assert sum(steps.values()) <= act["timings"]["total"] + 0.01, (steps, act["timings"])
        assert _metric(r.metrics(), "stream_autoscaler_action_step_seconds",
                       'action="repartition",job="rt",step="rewrite"') == pytest.approx(
            steps["rewrite"])
        cp = Path(load_job(str(job)).spec.checkpoint.location)
        assert state.partitions_of(cp, act["result"]["repartition_batch"]) == n
        st = _batches_after(r, act["result"]["repartition_batch"], 1)
        assert st["partitions"] == n and st["phase"] == "Running"

    # Same count: a restart at a batch boundary, no repartition, and the resumed query's
    # batches capped (the controller's admission cap): what piled up while it was down drains
    # in batches of at most CAP records instead of one.
    act = r.action("/repartition", {"partitions": 2, "maxRecordsPerBatch": CAP})
    assert act["state"] == "succeeded" and "repartition_batch" not in act["result"]
    planned = max(act["result"]["batch"], act["result"].get("replays_batch") or -1)
    st = _batches_after(r, planned, 3)
    assert st["maxRecordsPerBatch"] == CAP
    capped = _records_per_batch(tmp_path / "job" / "cp", planned)
    print("batches after the capped restart", capped)
    assert capped and max(capped.values()) == CAP and min(capped.values()) > 0, capped
    # how long the job was down (its stop to its first commit), exported for the engine's
    # next restart estimate; every executor is warm, so no warm-up came before the stop
    down = act["timings"]["down"]
    assert "warmed" not in act["timings"] and "warmup" not in act["result"], act
    assert act["timings"]["stop"] <= down <= act["timings"]["first_commit"], act["timings"]
    exported = [line for line in r.metrics().splitlines()
                if line.startswith('stream_autoscaler_last_restart_seconds{job="rt"}')]
    assert exported and float(exported[0].split()[-1]) == pytest.approx(down), exported
    assert r.stop() == 0
    _verify(job, local_spark)

    out = subprocess.run([sys.executable, "-m", "app.cli", "checkpoint", "inspect",
                          str(tmp_path / "job" / "cp")], cwd=REPO, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    info = json.loads(out.stdout)
    assert info["partitions"] == 2 and info["job"] == "rt" and info["uncommittedBatch"] is None


def test_failed_repartition_rolls_back_and_killed_driver_recovers_with_more_partitions(
    start_runner, tmp_path, local_spark
):
    """A failed repartition rolls back; then the driver is SIGKILLed mid-stream and a new
    runner recovers on the checkpoint with more state partitions (``--state-partitions``, how
    the controller restores with more capacity): the batch the killed driver left is finished
    at the old count, the state repartitioned, and every record counted once."""
    job = write_job(tmp_path / "job", partitions=4)
    r = start_runner(job, env={"STREAM_AUTOSCALER_FAULT": "repartition-after-write"},
                     max_executors=1)
    _batches_after(r, 0, 1)
    act = r.action("/repartition", {"partitions": 8})
    print("failed repartition", json.dumps(act["timings"]), act["result"], act["error"])
    assert act["state"] == "failed" and "injected fault" in act["error"]
    assert act["result"]["rolled_back"] is True
    st = _batches_after(r, act["result"]["batch"], 2)
    assert st["phase"] == "Running" and st["partitions"] == 4
    assert "repartition" in st["lastError"]
    cp = tmp_path / "job" / "cp"
    assert all(state.partitions_of(cp, b) == 4 for b in state.checkpoint.batches(cp / "offsets"))

    # SIGKILL the driver mid-stream; a new runner on the same checkpoint resumes at 6.
    before = st["lastCommittedBatch"]
    r.kill()
    t0 = time.monotonic()
    planned = max(state.checkpoint.batches(cp / "offsets"))  # the last the killed driver planned
    r2 = start_runner(["--job", str(job), "--state-partitions", "6",
                       "--max-records-per-batch", str(CAP)], max_executors=1)
    st = _batches_after(r2, before, 3)
    print(f"recovered at 6 state partitions: kill -> {st['lastCommittedBatch'] - before} "
          f"batches in {time.monotonic() - t0:.1f} s, resumed from {st['resumedFromBatch']}")
    assert st["resumedFromBatch"] is not None and st["resumedFromBatch"] >= before
    assert st["partitions"] == 6 and st["lastError"] is None, st
    # the recovery's steps: session, executors, the state rewritten, the query, its first batch
    assert {"session", "executors", "snapshot", "rewrite", "query_start", "first_commit"} <= set(
        st["startSteps"]), st["startSteps"]
    print("recovery steps", json.dumps(st["startSteps"]), st["startFirstBatch"])
    # its first commit ran a batch of the new layout: the one in flight was finished before
    first = st["startFirstBatch"]
    assert first["replayed"] is False and first["batchId"] > st["resumedFromBatch"], first
    assert 0 <= first["rows"] <= CAP and first["seconds"] > 0, first
    assert st["maxRecordsPerBatch"] == CAP
    last = max(state.checkpoint.batches(cp / "offsets"))
    assert state.partitions_of(cp, last) == 6
    # every batch the new runner planned is capped: the batch the killed driver left in flight,
    # if any, is replayed as planned (a one-batch run at the old count); with none in flight the
    # checkpoint is repartitioned at once and the pile waits for the resumed query's batches
    rewritten = min(b for b in state.checkpoint.batches(cp / "offsets")
                    if state.partitions_of(cp, b) == 6)
    st = _batches_after(r2, rewritten, 3)
    capped = _records_per_batch(cp, planned)
    print(f"batches after the capped recovery (the killed driver planned up to {planned})",
          capped)
    assert capped and max(capped.values()) == CAP, capped
    assert r2.stop() == 0
    result = _verify(job, local_spark)
    print("exactly-once after kill:", result.keys_checked, "keys", result.records)


def test_a_recovery_from_a_checkpoint_that_ends_on_a_commit_reads_its_pile_capped(
    start_runner, tmp_path
):
    """A driver gone between batches leaves a checkpoint that ends on a commit (here: a stop
    at a batch boundary). A new runner at more state partitions repartitions it at once, with
    no one-batch run at the old count first (``Trigger.Once`` would read the whole pile of the
    outage in one batch, past any cap): every batch it plans reads at most the cap."""
    job = write_job(tmp_path / "job", partitions=4)
    r = start_runner(job, max_executors=1)
    _batches_after(r, 0, 1)
    assert r.stop() == 0
    cp = tmp_path / "job" / "cp"
    ends = state.inspect(str(cp))
    assert ends.uncommitted_batch is None and ends.last_committed_batch is not None, ends
    time.sleep(5)  # the source keeps arriving at 2,000 records/s: a pile of several caps
    r2 = start_runner(["--job", str(job), "--state-partitions", "6",
                       "--max-records-per-batch", str(CAP)], max_executors=1)
    st = _batches_after(r2, ends.last_committed_batch, 4)
    assert st["partitions"] == 6 and st["lastError"] is None, st
    # the recovery's steps: session, executors, the state rewritten, the query, its first batch
    assert {"session", "executors", "snapshot", "rewrite", "query_start", "first_commit"} <= set(
        st["startSteps"]), st["startSteps"]
    print("recovery steps", json.dumps(st["startSteps"]), st["startFirstBatch"])
    # the start's first batch: the first after the repartition's own, capped, nothing replayed
    first = st["startFirstBatch"]
    assert first["batchId"] == ends.last_committed_batch + 2 and first["replayed"] is False, first
    assert 0 < first["rows"] <= CAP, first
    # the cap the query started with, as the controller reads it (controller/core/caplift.py)
    assert _metric(r2.metrics(), "stream_autoscaler_admission_cap_records") == CAP
    read = _records_per_batch(cp, ends.last_committed_batch)
    print(f"batches after a recovery from batch {ends.last_committed_batch} (committed)", read)
    assert read[ends.last_committed_batch + 1] == 0  # the repartition's own batch
    assert max(read.values()) == CAP, read  # the pile, in capped batches
    assert r2.stop() == 0


def test_corrupt_or_foreign_checkpoint_is_refused_and_left_alone(cluster, tmp_path):
    cases = {
        "missing-metadata": {"offsets/0": "v1\n{}\n{\"offset\": 1}\n"},
        "unparsable-offsets": {"metadata": '{"id":"q1"}', "offsets/0": "garbage",
                               "commits/0": "v1\n{}\n"},
        "foreign-job": {"metadata": '{"id":"q1"}',
                        "stream-autoscaler.json": '{"job": "other", "queryId": "q1"}'},
        "unsupported-provider": {
            "metadata": '{"id":"q1"}', "commits/0": "v1\n{}\n",
            "offsets/0": 'v1\n{"conf":{"spark.sql.streaming.stateStore.providerClass":'
                         '"org.apache.spark.sql.execution.streaming.state.'
                         'HDFSBackedStateStoreProvider","spark.sql.shuffle.partitions":"4"}}\n'},
    }
    for problem, files in cases.items():
        job = write_job(tmp_path / problem)
        cp = tmp_path / problem / "cp"
        for rel, text in files.items():
            (cp / rel).parent.mkdir(parents=True, exist_ok=True)
            (cp / rel).write_text(text)
        before = {p: p.read_bytes() for p in cp.rglob("*") if p.is_file()}
        out = subprocess.run(
            [sys.executable, "-m", "app.cli", "runner", "--job", str(job), "--master",
             cluster.master_url, "--control-port", "0", "--metrics-port", "0",
             "--token-file", str(tmp_path / "token")],
            cwd=REPO, capture_output=True, text=True, timeout=120)
        assert out.returncode == 2, (problem, out.stderr[-2000:])
        assert problem in out.stderr and "Traceback" not in out.stderr, out.stderr[-2000:]
        after = {p: p.read_bytes() for p in cp.rglob("*") if p.is_file()}
        assert after == before, f"{problem}: the checkpoint changed"


def test_bad_manifest_names_file_and_field(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: stream-autoscaler.io/v1alpha1\nkind: StreamJob\n"
                   "metadata: {name: x}\nspec:\n  source: {type: burst, trace: t.csv}\n"
                   "  pipeline: []\n  sink: {type: files, path: /tmp/x}\n")
    out = subprocess.run([sys.executable, "-m", "app.cli", "runner", "--job", str(bad)],
                         cwd=REPO, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert f"{bad}: spec.pipeline ([])" in out.stderr
    assert f"{bad}: spec.checkpoint: required field is missing" in out.stderr
    assert "Traceback" not in out.stderr


def test_a_repartition_whose_rollback_fails_leaves_the_query_stopped(start_runner, tmp_path):
    """Issue #15: the runner restarted the query even when the rollback failed, on a checkpoint
    in an unknown state. Now it stops in Failed and says what to do."""
    job = write_job(tmp_path / "job", partitions=4)
    r = start_runner(job, env={"STREAM_AUTOSCALER_FAULT":
                               "repartition-after-write,repartition-rollback"},
                     max_executors=1)
    _batches_after(r, 0, 1)
    act = r.action("/repartition", {"partitions": 8})
    assert act["state"] == "failed" and act["result"]["rolled_back"] is False
    assert "ROLLBACK FAILED" in act["error"] and "NOT restarted" in act["error"]
    st = r.status()
    assert st["phase"] == "Failed" and "checkpoint inspect" in st["lastError"]
    committed = st["lastCommittedBatch"]
    time.sleep(4)
    assert r.status()["lastCommittedBatch"] == committed, "the query was restarted anyway"


def _metric(text: str, name: str, labels: str = 'job="rt"') -> float | None:
    """The sample of ``name`` with exactly these labels (as exposed)."""
    line = next((x for x in text.splitlines() if x.startswith(f'{name}{{{labels}}}')), None)
    return None if line is None else float(line.rsplit(" ", 1)[1])


def test_an_idle_query_reports_nothing_waiting_even_right_after_a_restart(start_runner, cluster,
                                                                          tmp_path, monkeypatch):
    """Spark 4 posts no progress event for a trigger without new data, only ``onQueryIdle``.
    The runner ignored it: once the input stopped, the arrival rate stayed at the last batch's
    value for ever, and a runner resumed on a checkpoint with nothing new to read had an
    unknown backlog. The controller read either as "no batch committed while data waits" and
    restarted an idle job again and again (seen in CI on the real-pod tier, after a recovery
    that ended after the trace). Its first runner also shows that a local run's JVMs map the
    install's class archive (:func:`assert_the_jvms_map_the_installs_archive`: one runner fewer
    to start in the suite)."""
    job = write_job(tmp_path / "job")
    (tmp_path / "job" / "trace.csv").write_text("t,input_rate\n0,2000\n4,0\n", encoding="utf-8")
    waiting = ("stream_autoscaler_arrival_rows_per_second", "stream_autoscaler_backlog_records")

    def nothing_waits(s: dict[str, Any]) -> bool:
        return s["rates"]["arrival_rows_per_second"] == 0 and s["backlog"]["records"] == 0

    r = start_runner(job, env=without_the_lanes_archive(monkeypatch), max_executors=1)
    # Every record read first: a batch planned before the trace's 4 s are over also leaves
    # nothing waiting (its backlog is what was there when it was planned), then the next batch
    # reads the rest -- a fast start-up made that the rule on a quiet machine.
    st = r.wait(lambda s: s["lastCommittedBatch"] is not None and nothing_waits(s)
                and (_metric(r.metrics(), "stream_autoscaler_input_rows_total") or 0) >= 8_000,
                120, "all 8,000 records read, then arrival and backlog 0")
    assert all(_metric(r.metrics(), m) == 0 for m in waiting), r.metrics()
    assert_the_jvms_map_the_installs_archive(r, cluster)
    last = st["lastCommittedBatch"]
    assert r.stop() == 0

    r2 = start_runner(job, max_executors=1)  # resumed on the same checkpoint: nothing new
    st = r2.wait(nothing_waits, 90, "arrival and backlog 0 after a restart with no new data")
    assert st["resumedFromBatch"] == last and st["lastCommittedBatch"] == last, st
    assert all(_metric(r2.metrics(), m) == 0 for m in waiting), r2.metrics()
    assert r2.stop() == 0


def slow_row(ms: int) -> str:
    """A filter condition that keeps every row and sleeps ``ms`` per row. The sleep's argument
    depends on the row: with literal arguments Spark evaluates ``java_method`` once, when it
    folds constants, and ``... OR true`` folds to true (measured: 1,000 rows in 0.2 s instead
    of 2 s)."""
    per_row = f"cast(length(cast(key as string)) * 0 + {ms} as bigint)"
    return f"length(coalesce(java_method('java.lang.Thread', 'sleep', {per_row}), '')) >= 0"


SLOW_ROW = slow_row(6)
"""6 ms per row: batches capped at 300 records take ~1.8 s on the job's 1 s trigger, so they run
back to back and a stop catches one in flight (the runner stops at once when the last batch
outlasted the trigger: ``operators.driver.gap``). At 4 ms (1.2 s) a batch on a quiet lane was
timed under the trigger, the stop waited for a gap and found one."""


def test_a_job_started_into_a_burst_reports_its_arrival_before_its_first_batch_commits(
    start_runner, tmp_path
):
    """6,000 records/s into one executor core at 1 ms a record: the first batch (the arrivals
    since the run started, capped at 15,000 records) runs for at least 15 s and nothing commits
    meanwhile. The runner asks the burst source's clock while it runs, so /status and /metrics
    carry the arrival rate long before that batch ends. (The cap bounds the batch the stop
    drains: uncapped, it holds every record since the clock started, which grows with the
    runner's start-up; on a loaded host, past the stop's two minutes.)"""
    job = write_job(tmp_path / "job", rate=6000)
    doc = yaml.safe_load(job.read_text())
    doc["spec"]["pipeline"].insert(0, {"type": "filter", "name": "slow",
                                       "condition": slow_row(1)})
    job.write_text(yaml.safe_dump(doc), encoding="utf-8")
    r = start_runner(["--job", str(job), "--max-records-per-batch", "15000"], max_executors=1)
    seen = None
    deadline = time.monotonic() + 150
    while time.monotonic() < deadline and seen is None:
        metrics = r.metrics()
        st = r.status()
        if st["lastCommittedBatch"] is not None:
            break
        arrival = st["rates"]["arrival_rows_per_second"]
        if arrival is not None:
            seen = (arrival, metrics)
        time.sleep(0.5)
    assert seen is not None, f"no arrival before the first commit: {r.status()}"
    arrival, metrics = seen
    in_flight = [line for line in metrics.splitlines()
                 if line.startswith("stream_autoscaler_batch_in_flight_id{")]
    print("arrival while the first batch runs", arrival, in_flight)
    assert 3000 <= arrival <= 9000, arrival  # the trace's 6,000 records/s
    assert in_flight, "the first batch is in flight"
    assert r.stop() == 0


def test_a_repartition_skips_the_batch_in_flight_that_no_reader_saw(start_runner, tmp_path,
                                                                     local_spark):
    """Batches back to back: the stop for a repartition catches one in flight. The files sink's
    readers take only committed batches' directories, so the batch is skipped, not run to its
    end in a query of its own: its directory deleted, Spark commits it empty, the resumed query
    reads its records again on the new layout, and every record is counted once."""
    job = write_job(tmp_path / "job", rate=600)
    doc = yaml.safe_load(job.read_text())
    doc["spec"]["pipeline"].insert(0, {"type": "filter", "name": "slow", "condition": SLOW_ROW})
    job.write_text(yaml.safe_dump(doc), encoding="utf-8")
    r = start_runner(["--job", str(job), "--max-records-per-batch", "300"], max_executors=1)
    # back to back, as the runner sees it: the last batch it timed outlasted the 1 s trigger
    r.wait(lambda s: (s["lastCommittedBatch"] or -1) >= 3
           and (s.get("batchDurationSeconds") or 0) >= 1.0, 120, "batches back to back")
    # the cap again for the resumed query (the runner's own is the start's): 600 records/s
    # arrive and 250 are processed, so uncapped batches would grow without end
    act = r.action("/repartition", {"partitions": 8, "maxRecordsPerBatch": 300})
    print("repartition with a batch in flight", json.dumps(act["timings"]),
          json.dumps(act["steps"]), act["result"])
    assert act["state"] == "succeeded", act
    skipped = act["result"].get("skipped_batch")
    assert skipped is not None, act["result"]  # back to back: the stop caught one
    assert "drain" not in act["steps"], act["steps"]
    cp = tmp_path / "job" / "cp"
    assert state.inspect(str(cp)).last_committed_batch is not None
    assert act["result"]["repartition_batch"] == skipped + 1
    assert state.partitions_of(cp, skipped + 1) == 8
    _batches_after(r, skipped + 1, 2)
    assert r.stop() == 0
    _verify(job, local_spark)
