"""The fuzz tier's worker: feeds hostile inputs to our loaders and endpoints in a process of its
own, under a memory cap and a per-input time limit, and reports what happened to each.

    python -m tests.fuzz.worker SEED COUNT REPORT.json

Outcomes per input: ``ok`` (accepted), ``refused`` (our error type, with its message), or a
defect: ``traceback`` (any other exception), ``hang`` (over PER_INPUT_SECONDS), ``oom``. The
generators are deterministic from SEED, so a defect found in CI replays locally.
"""

from __future__ import annotations

import contextlib
import io
import json
import random
import resource
import signal
import socket
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
PER_INPUT_SECONDS = 5.0
MEMORY_CAP_BYTES = 3 << 30
"""3 GiB of address space for the worker: a loader that expands an alias bomb dies here (reported
as a defect), not the CI machine."""

HOSTILE_VALUES: list[Any] = [
    True, False, None, "8", "", "x" * 5000, -1, 0, 1e308, -1e308, float("inf"), float("nan"),
    10**40, 2**63, 0.5, [], {}, [1, 2], {"a": 1}, "1e3", ".inf", "\x00", "é" * 10,
    1e-9, 5e-324, "\x1b[2J", "1:30",
]
RAW_TOKENS = ("!!int 'eight'", "!!timestamp 2001-02-30", "2001-02-30", "1:30", "0b1000", "+8",
              "017", "1_000", "0x1F", "!!float .inf", "!!binary AAAA", "!!python/object:os.system",
              "!!set {a: null}", "!!omap [a: 1]", "\"\\e[31mred\"", "&a x", "*a", "~", "<<: {}")
"""YAML text a value may be written as: tags, YAML 1.1 number and date forms (read otherwise by
the API server), anchors and a terminal escape."""
CONTROL = {chr(c) for c in range(32) if chr(c) not in "\n\t"} | {"\x7f"}


class Timeout(Exception):
    pass


class Refused(Exception):
    """A tool's refusal gathered by the campaign (each tool's own error, already named)."""


def _alarm(*_: object) -> None:
    raise Timeout()


def run_one(fn: Callable[[], Any], refused: tuple[type[BaseException], ...]) -> dict[str, Any]:
    signal.setitimer(signal.ITIMER_REAL, PER_INPUT_SECONDS)
    started = time.perf_counter()
    try:
        fn()
        outcome: dict[str, Any] = {"outcome": "ok"}
    except refused as e:
        message = str(e)
        outcome = {"outcome": "refused", "message": message[:300]}
        if CONTROL & set(message):  # an escape sequence echoed raw reaches the terminal
            outcome = {"outcome": "raw-control", "message": repr(message[:300])}
    except Timeout:
        outcome = {"outcome": "hang"}
    except MemoryError:
        outcome = {"outcome": "oom"}
    except Exception as e:
        outcome = {"outcome": "traceback", "error": f"{type(e).__name__}: {str(e)[:200]}",
                   "trace": traceback.format_exc(limit=6)}
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    outcome["seconds"] = round(time.perf_counter() - started, 4)
    return outcome


# --- generators ---------------------------------------------------------------------------------


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from _paths(v, (*prefix, i))


def _set(doc: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    node = doc
    for p in path[:-1]:
        node = node[p]
    node[path[-1]] = value
    return doc


def mutated_yaml(base: dict[str, Any], rng: random.Random) -> bytes:
    """A manifest with one structural mutation or one text-level corruption."""
    kind = rng.random()
    doc = json.loads(json.dumps(base))
    if kind < 0.45:  # a hostile value at a random place
        paths = [p for p in _paths(doc) if p]
        doc = _set(doc, rng.choice(paths), rng.choice(HOSTILE_VALUES))
        return yaml.safe_dump(doc, allow_unicode=True).encode("utf-8")
    if kind < 0.55:  # a value written as a tag, a YAML 1.1 form or an anchor
        paths = [p for p in _paths(doc) if p and not isinstance(_get(doc, p), dict | list)]
        doc = _set(doc, rng.choice(paths), "@@RAW@@")
        return yaml.safe_dump(doc).replace("'@@RAW@@'", rng.choice(RAW_TOKENS)).encode("utf-8")
    if kind < 0.65:  # an unknown key somewhere
        paths = [p for p in _paths(doc) if isinstance(_get(doc, p), dict)]
        _get(doc, rng.choice(paths))[rng.choice(["sloSecs", "exectors", "x", "spec",
                                                 "\x1b[2Jx", "k\x07"])] = 1
        return yaml.safe_dump(doc, allow_unicode=True).encode("utf-8")
    text = yaml.safe_dump(doc).encode("utf-8")
    if kind < 0.75:  # truncated anywhere
        return text[: rng.randrange(len(text))]
    if kind < 0.83:  # random bytes spliced in
        i = rng.randrange(len(text))
        return text[:i] + bytes(rng.randrange(256) for _ in range(rng.randint(1, 8))) + text[i:]
    if kind < 0.88:  # deep nesting
        return b"a: " + b"[" * rng.randint(100, 3000) + b"]" * 10
    if kind < 0.93:  # an alias bomb of random size
        levels, fan = rng.randint(3, 10), rng.randint(3, 10)
        lines = ['a0: &a0 "lol"'] + [
            f"a{i}: &a{i} [{', '.join(f'*a{i - 1}' for _ in range(fan))}]"
            for i in range(1, levels + 1)]
        return ("\n".join(lines) + "\n").encode()
    if kind < 0.97:  # a duplicate top-level key
        return text + text.split(b"\n", 1)[0] + b"\n"
    return b"\xff\xfe" + text  # not UTF-8


def _get(doc: Any, path: tuple[Any, ...]) -> Any:
    for p in path:
        doc = doc[p]
    return doc


def hostile_trace(rng: random.Random) -> str:
    unit = rng.choice(["input_rate", "load", "bogus"])
    rows = [f"t,{unit}"]
    t = 0.0
    for _ in range(rng.randint(0, 200)):
        v = rng.choice([rng.uniform(0, 10), rng.uniform(0, 1e6), 1e12, -1, "nan", "inf", "x", ""])
        rows.append(f"{t:g},{v}")
        t += rng.choice([1.0, 0.0, -5.0, 1e9, rng.uniform(0, 60)])
    if rng.random() < 0.1:
        rows.insert(rng.randrange(len(rows)), "\x00,\x00")
    if rng.random() < 0.1:  # a row with a field more than the header
        rows.insert(rng.randrange(1, len(rows) + 1), f"{t:g},1,2")
    return "\n".join(rows) + "\n"


def hostile_request(rng: random.Random) -> bytes:
    length = rng.choice(["-1", "abc", "1e3", "99999999999", "5", " 7 ", "", "9" * 5000])
    body = rng.choice([b'{"target": 2}', b"[" * 20000, b"{", b'{"target": true}', b"\x00" * 10,
                       b'{"partitions": 1e308}', b'{"actionId": "' + b"a" * 500 + b'"}', b""])
    path = rng.choice(["/executors", "/repartition", "/stop", "/status", "/healthz", "/x",
                       "/" + "a" * 5000])
    method = rng.choice(["POST", "GET", "PUT", "BREW"])
    token = rng.choice(["tok", "tok\n", "wrong", ""])
    head = f"{method} {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n"
    if length:
        head += f"Content-Length: {length}\r\n"
    if rng.random() < 0.05:
        return bytes(rng.randrange(256) for _ in range(rng.randint(1, 200)))  # not HTTP at all
    return head.encode() + b"Connection: close\r\n\r\n" + body


# --- the campaign -------------------------------------------------------------------------------


def campaign(seed: int, count: int) -> dict[str, Any]:
    from contracts.errors import ContractError
    from contracts.manifests import load_manifest
    from contracts.trace import parse_trace

    rng = random.Random(seed)
    results: dict[str, list[dict[str, Any]]] = {"policy": [], "streamjob": [], "trace": [],
                                                "control": []}
    bases = {
        "policy": yaml.safe_load((REPO / "policies" / "default.yaml").read_text()),
        "streamjob": yaml.safe_load((REPO / "k8s" / "samples" / "wordcount.yaml").read_text()),
    }
    with tempfile.TemporaryDirectory() as tmp:
        for kind, base in bases.items():
            for i in range(count):
                path = Path(tmp) / f"{kind}-{i}.yaml"
                path.write_bytes(mutated_yaml(base, rng))
                results[kind].append(run_one(lambda p=path: load_manifest(p), (ContractError,)))

        def trace_use(text: str) -> None:
            tr = parse_trace(text, "fuzz.csv")
            tr.mean(), tr.peak(), tr.arrived(tr.duration / 2), tr.arrival_time(1e6)

        for _ in range(count):
            text = hostile_trace(rng)
            results["trace"].append(run_one(lambda t=text: trace_use(t), (ContractError,)))
    results["control"] = control_campaign(rng, count)
    results.update(cluster_campaigns(rng, count))
    return results


def control_campaign(rng: random.Random, count: int) -> list[dict[str, Any]]:
    from contracts.runner_api import ActionRecord, Phase, RunnerStatus
    from operators.driver.control import ControlServer

    class StandIn:  # a seam we own: what operators.driver.control calls on a runner
        phase = Phase.RUNNING

        def status(self) -> RunnerStatus:
            return RunnerStatus(job="fuzz", phase=self.phase)

        def find_action(self, action_id: str | None) -> ActionRecord | None:
            return None

        def submit(self, request: Any) -> ActionRecord:
            return ActionRecord(kind=request.kind, params=request.body())

    from operators.driver import control

    # the deadline's code path, sooner: a body shorter than its Content-Length is waited for
    # until the whole-request deadline, then the connection is closed
    control.REQUEST_DEADLINE_SECONDS = 0.25
    server = ControlServer(StandIn(), token="tok").start()  # type: ignore[arg-type]
    out = []
    try:
        for _ in range(count):
            req = hostile_request(rng)

            def send(r: bytes = req) -> None:
                with socket.create_connection((server.host, server.port), timeout=3) as s:
                    s.sendall(r)
                    data = s.recv(65536)
                # an answer or a closed connection (b""), never silence; a request line that is
                # not HTTP/1.x gets the standard library's HTTP/0.9 answer: an error page
                if data and not data.startswith((b"HTTP/1.", b"<!DOCTYPE HTML>")):
                    raise AssertionError(f"not an HTTP answer: {data[:40]!r}")

            out.append(run_one(send, ()))
    finally:
        server.stop()
    return out


def cluster_campaigns(rng: random.Random, count: int) -> dict[str, list[dict[str, Any]]]:
    """What a job author may try against the cluster (tests/fuzz/hostile.py): Spark settings,
    JVM flags and mount paths (``validate --cluster``'s reading), attach URLs, checkpoints, and
    simulator models."""
    from contracts.errors import ContractError
    from contracts.manifests import load_manifest
    from controller.kube.attach import DEFAULT_ALLOWED_HOSTS, url_problem
    from operators.state import CheckpointError, backup, inspect, restore
    from tests.fuzz import hostile

    out: dict[str, list[dict[str, Any]]] = {"clusterjob": [], "url": [], "checkpoint": [],
                                            "model": []}
    base = yaml.safe_load((REPO / "k8s" / "samples" / "streamjob-burst.yaml").read_text())
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(count):
            path = Path(tmp) / f"streamjob-{i}.yaml"
            text, must_refuse = hostile.cluster_job(base, rng)
            path.write_bytes(text)
            r = run_one(lambda p=path: load_manifest(p, cluster=True), (ContractError,))
            if must_refuse and r["outcome"] == "ok":
                r = {**r, "outcome": "bypass", "input": text.decode()[-600:]}
            out["clusterjob"].append(r)

    def url_checked(url: str) -> None:
        problem = url_problem("spec.attach.controlUrl", url, DEFAULT_ALLOWED_HOSTS)
        if problem is not None:
            raise ContractError(problem)
        host = hostile.connected_host(url)
        if host is not None and not host.endswith(".svc"):
            raise AssertionError(f"allowed, and requests connects to {host!r}")

    for _ in range(count):
        url = hostile.hostile_url(rng)
        r = run_one(lambda u=url: url_checked(u), (ContractError,))
        if r["outcome"] == "traceback" and "requests connects to" in r.get("error", ""):
            r = {**r, "outcome": "elsewhere", "input": url[:300]}
        out["url"].append(r)

    def checkpoint_tools(root: Path, cp: Path) -> None:
        refusals = []
        for step in (lambda: inspect(cp), lambda: backup(cp, root / "backup"),
                     lambda: restore(cp, root / "restored")):
            try:
                step()
            except CheckpointError as e:
                refusals.append(str(e))
        copied = root / "backup"
        if copied.exists() and any(p.is_symlink() for p in copied.rglob("*")):
            raise AssertionError("a backup copied a symbolic link")
        if refusals:
            raise Refused("; ".join(refusals))

    for _ in range(count // 2):
        with tempfile.TemporaryDirectory() as tmp:
            cp, made = hostile.hostile_checkpoint(Path(tmp), rng)
            r = run_one(lambda t=tmp, c=cp: checkpoint_tools(Path(t), c), (Refused,))
            out["checkpoint"].append(r if r["outcome"] in ("ok", "refused") else
                                     {**r, "input": made})

    from app.cli import main as cli

    def simulate(model: Path, trace: Path, where: Path) -> None:
        err = io.StringIO()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            rc = cli(["simulate", "--trace", str(trace), "--model", str(model),
                      "--out", str(where), "--quiet", "--duration", "60"])
        if "Traceback" in err.getvalue() or rc not in (0, 2):
            raise AssertionError(f"rc {rc}: {err.getvalue()[-300:]}")
        if rc == 2:
            raise Refused(err.getvalue().strip())

    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp) / "trace.csv"
        trace.write_text("t,load\n0,0.5\n20,3\n40,0.5\n60,0.5\n")
        for i in range(count // 4):
            model = Path(tmp) / f"model-{i}.yaml"
            model.write_text(hostile.hostile_model(rng))
            out["model"].append(run_one(
                lambda m=model, n=i: simulate(m, trace, Path(tmp) / f"out-{n}"), (Refused,)))
    return out


def main() -> int:
    seed, count, report = int(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3])
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP_BYTES, MEMORY_CAP_BYTES))
    signal.signal(signal.SIGALRM, _alarm)
    sys.setrecursionlimit(3000)
    started = time.perf_counter()
    results = campaign(seed, count)
    report.write_text(json.dumps({"seed": seed, "seconds": time.perf_counter() - started,
                                  "results": results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
