"""The demo's report.html in a real headless browser (Debian's chromium, `make browser`): the
timeline plot is there, decoded and drawn, not a broken image.

The report comes from the demo's own code (:mod:`app.demo_report`) over a small synthetic
timeline: this is about the report rendering, not Spark (tests/e2e runs the real demo).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
from pathlib import Path

import numpy as np
import pytest
from matplotlib.colors import to_rgb
from matplotlib.image import imread

from app import demo_report as report
from contracts.trace import parse_trace
from tests.realcomponents import unavailable

WINDOW = (1100, 1300)
"""CSS pixels; with a device scale factor of 1 the screenshot has as many."""
CHROMIUM_SECONDS = 30
PROBE = """<script>addEventListener("load", () => {
  const img = document.getElementById("timeline"), box = img.getBoundingClientRect();
  document.body.insertAdjacentHTML("beforeend", "<pre id=probe>" + JSON.stringify({
    complete: img.complete, naturalWidth: img.naturalWidth, naturalHeight: img.naturalHeight,
    left: box.left, top: box.top, width: box.width, height: box.height}) + "</pre>");
});</script>"""
"""Appended to a copy of the report: writes what the browser made of the image into the DOM."""


def _chromium() -> str:
    found = os.environ.get("CHROMIUM_BIN") or shutil.which("chromium")
    if not found:
        unavailable("no chromium for the report's browser test: run `make browser`")
    return found


def _run(args: list[str], profile: Path) -> str:
    """One headless chromium run (as root it needs --no-sandbox), killed with its children
    if it outlives CHROMIUM_SECONDS."""
    cmd = [
        _chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
        f"--user-data-dir={profile}", "--force-device-scale-factor=1",
        f"--window-size={WINDOW[0]},{WINDOW[1]}", *args,
    ]  # fmt: skip
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        out, err = proc.communicate(timeout=CHROMIUM_SECONDS)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail(f"chromium did not finish in {CHROMIUM_SECONDS} s: {cmd}")
    assert proc.returncode == 0, err[-2000:]
    return out


def _write_report(out: Path, with_plot: bool = True) -> Path:
    """report.html of a 120 s run: a repartition at 30 s, a driver recovery at 80 s."""
    trace = parse_trace("t,load\n0,0.3\n20,0.9\n70,0.25\n").scaled(100_000)
    rows = []
    for t in range(120):
        phase = "Repartitioning" if 30 <= t < 45 else "Down" if 80 <= t < 95 else "Running"
        stopped = phase != "Running"
        rows.append(report.Row(
            t=float(t), input_rate=0.0 if stopped else 60_000.0,
            processed_rate=0.0 if stopped else 70_000.0, backlog_records=500.0 * t,
            lag_seconds=t / 4, executors=1 if t < 45 else 2, executors_target=2,
            partitions=1 if t < 45 else 2, phase=phase,
        ))  # fmt: skip
    report.fill_arrivals(rows, trace, lead=2.0)
    actions = [
        {"t": 30.0, "t_end": 45.0, "action": "repartition", "reason": "RepartitionStateBound",
         "executors": 2, "partitions": 2},
        {"t": 80.0, "t_end": 95.0, "action": "recover", "reason": "RecoverFromFailure",
         "executors": 2, "partitions": None},
    ]  # fmt: skip
    png = out / "timeline.png"
    if with_plot:
        report.plot(png, rows, 30.0, "demo: browser test", actions)
    decisions = [{"t": a["t"], "reason": a["reason"], "message": "why"} for a in actions]
    html = out / "report.html"
    report.write_html(html, {"exactly_once": True}, png, decisions, actions)
    return html


def _probe(html: Path, profile: Path) -> dict[str, float]:
    probe = html.with_name("probe.html")
    probe.write_text(html.read_text(encoding="utf-8") + PROBE, encoding="utf-8")
    dom = _run(["--virtual-time-budget=5000", "--dump-dom", probe.as_uri()], profile)
    found = re.search(r'<pre id="probe">(.*?)</pre>', dom)
    assert found, dom[-2000:]
    return json.loads(found.group(1))


def test_the_report_shows_the_timeline_plot(tmp_path: Path) -> None:
    html = _write_report(tmp_path)
    image = _probe(html, tmp_path / "profile-dom")
    assert image["complete"] is True
    assert (image["naturalWidth"], image["naturalHeight"]) == (1200, 900)  # 12x9 in at 100 dpi
    assert image["width"] > 500 and image["height"] > 300
    assert image["top"] + image["height"] <= WINDOW[1]  # in the first screen

    shot = tmp_path / "shot.png"
    _run([f"--screenshot={shot}", html.as_uri()], tmp_path / "profile-shot")
    pixels = imread(shot)[..., :3]
    assert pixels.shape[:2] == (WINDOW[1], WINDOW[0])
    top, left = round(image["top"]), round(image["left"])
    plot = pixels[top : top + round(image["height"]), left : left + round(image["width"])]
    assert (plot.min(axis=2) < 0.9).mean() > 0.02  # drawn, not blank
    for color in ("tab:blue", "tab:green", "tab:red"):  # arrivals, processed, lag
        near = np.abs(plot - np.array(to_rgb(color))).max(axis=2) < 0.15
        assert near.sum() > 150, f"{color} lines not visible ({near.sum()} pixels)"
    above = pixels[: max(top - 5, 1)]  # the page above the plot: a heading, black on white
    assert (np.abs(above - np.array(to_rgb("tab:blue"))).max(axis=2) < 0.15).sum() == 0


def test_the_probe_sees_a_missing_plot(tmp_path: Path) -> None:
    """The check above can fail: a report without its PNG is a broken image to the browser."""
    html = _write_report(tmp_path, with_plot=False)
    image = _probe(html, tmp_path / "profile")
    assert image["naturalWidth"] == 0
