"""The test bed's waits say what they wait for while they wait, and why they gave up."""

from __future__ import annotations

from pathlib import Path

import pytest
import testbed_proc  # hack/testbed, on pytest's pythonpath (pyproject.toml)


def test_a_long_wait_reports_progress_then_returns(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(testbed_proc, "PROGRESS_EVERY_SECONDS", 0.3)
    polls = iter([False] * 6 + [True])
    testbed_proc.wait_until("kube-apiserver /readyz", lambda: next(polls), timeout=30)
    out = capsys.readouterr().out
    assert "testbed: still waiting for kube-apiserver /readyz (" in out
    assert "of 30 s)" in out


def test_a_wait_that_times_out_names_what_and_the_log_tail(tmp_path: Path) -> None:
    log = tmp_path / "etcd.log"
    log.write_text("starting\nbind: address already in use\n")
    with pytest.raises(TimeoutError, match=r"etcd not ready(.|\n)*address already in use"):
        testbed_proc.wait_until("etcd", lambda: False, timeout=0.3, log=log)
