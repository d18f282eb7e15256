"""A user's script reads ``sys.argv``; a restart runs it again while the previous run is still
returning from ``awaitTermination()``. The old run must not hand the new one the runner's argv
(seen in CI: the Kafka script's output path became the runner's ``job.yaml``)."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

from contracts.streamjob import StreamJob
from operators.query.application import ApplicationStarter, _Run

SCRIPT = """\
import sys
import sync
if sys.argv[1] == "first":
    sync.first_running.set()
    sync.first_may_end.wait(10)
else:
    sync.second_running.set()
    sync.first_ended.wait(10)
    sync.seen.append(list(sys.argv))
"""
SYNC = """\
import threading
first_running, first_may_end = threading.Event(), threading.Event()
second_running, first_ended = threading.Event(), threading.Event()
seen = []
"""


def _starter(script: Path, arg: str) -> ApplicationStarter:
    doc = {"apiVersion": "stream-autoscaler.io/v1alpha1", "kind": "StreamJob",
           "metadata": {"name": "argv"},
           "spec": {"checkpoint": {"location": str(script.parent / "cp")},
                    "application": {"script": str(script), "args": [arg, "/out"]}}}  # fmt: skip
    return ApplicationStarter(StreamJob.model_validate(doc))


def test_a_run_that_ends_late_leaves_the_next_runs_argv_alone(tmp_path: Path) -> None:
    script = tmp_path / "job.py"
    script.write_text(SCRIPT)
    (tmp_path / "sync.py").write_text(SYNC)
    before = list(sys.argv)
    first = threading.Thread(target=_starter(script, "first")._run_script, args=(_Run(False),))
    first.start()
    import importlib

    sys.path.insert(0, str(tmp_path))
    try:
        sync = importlib.import_module("sync")
        assert sync.first_running.wait(10)
        second = threading.Thread(
            target=_starter(script, "second")._run_script, args=(_Run(False),)
        )
        second.start()
        assert sync.second_running.wait(10)
        sync.first_may_end.set()  # the old run returns now, while the new one runs
        first.join(10)
        sync.first_ended.set()
        second.join(10)
        assert sync.seen == [[str(script), "second", "/out"]]
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("sync", None)
    assert sys.argv == before  # the last run to end gives the runner its argv back
