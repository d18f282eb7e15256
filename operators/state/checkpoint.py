"""Read a Structured Streaming checkpoint without Spark: batches, partitions, operators.

Usage::

    info = inspect(Path("/data/cp"))           # raises CheckpointError naming the problem
    info = inspect("s3a://bucket/cp")          # the same on an object store (:mod:`.store`)
    info.last_committed_batch, info.partitions, info.operators

Layout (Spark 4.x): ``metadata`` (the query id), ``offsets/<N>`` (``v1``, a JSON line with the
batch's conf — ``spark.sql.shuffle.partitions`` is the state partition count — then one line per
source), ``commits/<N>``, ``sources/``, ``state/<operator>/<partition>/``. A runner also leaves
``stream-autoscaler.json`` (the job it belongs to, so a foreign checkpoint is refused, and the
Spark file sink its query writes, which a repartition at start must extend).
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from operators.errors import OperatorsError, first_line
from operators.state.store import (
    CheckpointStore,
    StoreError,
    is_object_store,
    open_store,
    redact,
)

PARTITIONS_KEY = "spark.sql.shuffle.partitions"
PROVIDER_KEY = "spark.sql.streaming.stateStore.providerClass"
OWNER_FILE = "stream-autoscaler.json"
OBJECT_STORE_READERS = 16
"""Commit entries read at once from an object store: Spark keeps ~100 batches of them, one
request each, and read one after the other they cost a recovered driver on S3 seconds before
its session starts (docs/benchmark.md, "A start's checkpoint on S3")."""


class CheckpointError(OperatorsError, ValueError):
    """A checkpoint we must not start from. ``problem`` is a short code, ``str()`` the detail.

    Codes: ``not-local``, ``missing-metadata``, ``unparsable-metadata``, ``unparsable-offsets``,
    ``foreign-query``, ``foreign-job``, ``unsupported-provider``, ``in-use``.
    """

    def __init__(self, location: str, problem: str, detail: str) -> None:
        location = redact(location)
        super().__init__(f"checkpoint {location}: {problem}: {detail}")
        self.location = location
        self.problem = problem
        self.detail = detail


@dataclass(frozen=True)
class OperatorState:
    """One stateful operator's state as stored on disk (rows need Spark: see ``state_rows``)."""

    operator_id: int
    disk_bytes: int
    """Bytes under ``state/<operator>/`` (every retained version, not just the latest)."""
    rows: int | None = None


@dataclass(frozen=True)
class CheckpointInfo:
    """What a checkpoint holds, as of its last committed batch."""

    location: str
    query_id: str | None
    last_committed_batch: int | None
    last_offsets_batch: int | None
    partitions: int | None
    """State partitions of the last committed batch (``None`` before the first batch)."""
    provider: str | None
    operators: tuple[OperatorState, ...] = ()
    owner: dict[str, Any] = field(default_factory=dict)
    source_offsets: tuple[Any, ...] = ()
    """The last committed batch's end offsets, one per source (parsed JSON or raw text)."""

    @property
    def uncommitted_batch(self) -> int | None:
        """A batch planned (offsets written) but not committed, if any."""
        if self.last_offsets_batch is None:
            return None
        if self.last_committed_batch is None or self.last_offsets_batch > self.last_committed_batch:
            return self.last_offsets_batch
        return None

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly form (CLI and /status)."""
        return {
            "location": self.location,
            "queryId": self.query_id,
            "lastCommittedBatch": self.last_committed_batch,
            "lastOffsetsBatch": self.last_offsets_batch,
            "uncommittedBatch": self.uncommitted_batch,
            "partitions": self.partitions,
            "provider": self.provider,
            "job": self.owner.get("job"),
            "operators": [
                {"operatorId": o.operator_id, "diskBytes": o.disk_bytes, "rows": o.rows}
                for o in self.operators
            ],
        }


def local_path(location: str) -> Path:
    """The local directory of a checkpoint location (path or ``file:`` URI); an object store's
    is refused with ``not-local`` (what only a local directory can do: backups)."""
    parsed = urlparse(location)
    if parsed.scheme == "file":
        return Path(parsed.path)
    if parsed.scheme in ("",) or (len(parsed.scheme) == 1 and os.name == "nt"):
        return Path(location)
    raise CheckpointError(location, "not-local", "only a local checkpoint can do this")


def store_of(where: str | Path | CheckpointStore) -> CheckpointStore:
    """The store of a location (path or URI) or the store itself; CheckpointError when the
    location cannot be opened."""
    if isinstance(where, CheckpointStore):
        return where
    try:
        return open_store(where)
    except StoreError as e:
        raise CheckpointError(e.location, e.problem, e.detail) from None


def batches(where: str | Path | CheckpointStore, log: str | None = None) -> list[int]:
    """Batch ids in a log directory (``offsets/`` or ``commits/``), ascending.

    ``batches(cp, "offsets")`` for a checkpoint; ``batches(path)`` for a directory itself."""
    if log is None:
        return sorted(int(n) for n in store_of(where).listdir() if n.isdigit())
    return sorted(int(n) for n in store_of(where).listdir(log) if n.isdigit())


def read_offsets(
    where: str | Path | CheckpointStore, batch: int
) -> tuple[dict[str, Any], list[Any]]:
    """``(metadata, source offsets)`` of ``offsets/<batch>``; raises CheckpointError."""
    cp = store_of(where)
    try:
        lines = cp.read_text("offsets", str(batch)).splitlines()
        if not lines or not lines[0].startswith("v"):
            raise ValueError("no version line")
        meta = json.loads(lines[1])
        if not isinstance(meta, dict):
            raise ValueError("metadata line is not an object")
        if not isinstance(meta.get("conf", {}), dict):
            raise ValueError("its conf is not an object")
    except (OSError, ValueError, IndexError, UnicodeDecodeError, RecursionError) as e:
        raise _unreadable(cp.location, "unparsable-offsets", cp.describe("offsets", str(batch)),
                          e) from None
    sources: list[Any] = []
    for line in lines[2:]:
        try:
            sources.append(json.loads(line))
        except (ValueError, RecursionError):
            sources.append(line)
    return meta, sources


def partitions_of(where: str | Path | CheckpointStore, batch: int) -> int | None:
    """State partitions recorded for ``batch`` in the offsets log."""
    meta, _ = read_offsets(where, batch)
    cp = store_of(where)
    return _partition_count(meta.get("conf", {}), cp.location, batch)


def inspect(location: str | Path, *, expected_job: str | None = None) -> CheckpointInfo:
    """Read a checkpoint; raise :class:`CheckpointError` if it is corrupt, foreign or
    unreachable (an object store that does not answer).

    A missing or empty directory is a fresh checkpoint (everything ``None``).
    ``expected_job``: the job name the runner starts; a checkpoint another job left is refused.
    """
    loc = str(location)
    cp = store_of(loc)
    try:
        cp.check_bucket()
        return _inspect(cp, loc, expected_job)
    except StoreError as e:
        raise CheckpointError(loc, e.problem, e.detail) from None
    except OSError as e:  # the store itself failed (refused connection, no access)
        raise CheckpointError(loc, "unreachable", first_line(e)) from None


def _unreadable(loc: str, problem: str, where: str, e: BaseException) -> CheckpointError:
    """A file that could not be read or parsed: a StoreError keeps its own code (too-large,
    not-a-regular-file), anything else is ``problem`` at ``where``."""
    if isinstance(e, StoreError):
        return CheckpointError(loc, e.problem, e.detail)
    if isinstance(e, RecursionError):
        return CheckpointError(loc, problem, f"{where}: JSON nested too deeply")
    return CheckpointError(loc, problem, f"{where}: {first_line(e)}")




def _inspect(cp: CheckpointStore, loc: str, expected_job: str | None) -> CheckpointInfo:
    if not cp.is_dir() or not cp.listdir():
        return CheckpointInfo(loc, None, None, None, None, None)
    offsets, commits = batches(cp, "offsets"), batches(cp, "commits")
    if not cp.exists("metadata"):
        if offsets or commits or cp.exists("state"):
            raise CheckpointError(loc, "missing-metadata", f"{cp.describe('metadata')} is missing")
        return CheckpointInfo(loc, None, None, None, None, None)
    try:
        query_id = json.loads(cp.read_text("metadata"))["id"]
        if not isinstance(query_id, str):
            raise ValueError(f"id ({str(query_id)[:40]}) is not a string")
    except (OSError, ValueError, KeyError, TypeError, UnicodeDecodeError, RecursionError) as e:
        raise _unreadable(loc, "unparsable-metadata", cp.describe("metadata"), e) from None
    owner = _owner(cp, loc)
    if owner.get("queryId") and owner["queryId"] != query_id:
        raise CheckpointError(
            loc, "foreign-query",
            f"metadata has query id {query_id} but {OWNER_FILE} recorded {owner['queryId']}",
        )
    if expected_job and owner.get("job") and owner["job"] != expected_job:
        raise CheckpointError(
            loc, "foreign-job", f"it belongs to job {owner['job']!r}, not {expected_job!r}"
        )
    last_commit = commits[-1] if commits else None
    last_offsets = offsets[-1] if offsets else None
    if last_commit is not None and last_commit not in offsets:
        raise CheckpointError(loc, "unparsable-offsets", f"commit {last_commit} has no offsets")
    _check_logs(cp, loc, offsets, commits)
    partitions, provider = None, None
    sources: list[Any] = []
    if last_offsets is not None:
        read_offsets(cp, last_offsets)  # an unparsable newest entry is corruption too
    if last_commit is not None:
        meta, sources = read_offsets(cp, last_commit)
        conf = meta.get("conf", {})
        partitions = _partition_count(conf, loc, last_commit)
        provider = conf.get(PROVIDER_KEY)
        if provider and "RocksDB" not in provider:
            raise CheckpointError(
                loc, "unsupported-provider",
                f"state store {provider} cannot be repartitioned; start a new checkpoint",
            )
    return CheckpointInfo(
        loc, query_id, last_commit, last_offsets, partitions, provider,
        operators=tuple(_operators(cp)), owner=owner, source_offsets=tuple(sources),
    )


def _check_logs(cp: CheckpointStore, loc: str, offsets: list[int], commits: list[int]) -> None:
    """The offsets and commit logs as Spark writes them: contiguous ids (Spark purges only the
    oldest), at most one batch of offsets ahead of the commits (the one in flight), and every
    commit entry a version line and a JSON object. Otherwise "inspect" would call healthy a
    checkpoint a restart would refuse or, worse, resume from the wrong batch."""
    for name, ids in (("offsets", offsets), ("commits", commits)):
        if ids and ids[-1] - ids[0] + 1 != len(ids):
            # the first few gaps, walked pairwise: offsets/100000000 beside offsets/0 is one
            # gap, not a set of 10^8 missing ids built in memory
            missing = [m for a, b in itertools.pairwise(ids) if b > a + 1
                       for m in range(a + 1, min(b, a + 6))][:5]
            raise CheckpointError(loc, "gap-in-log", f"{cp.describe(name)}: batch(es) "
                                  f"{', '.join(map(str, missing[:5]))} missing")
    if offsets and commits and offsets[-1] > commits[-1] + 1:
        raise CheckpointError(loc, "gap-in-log", f"offsets reach batch {offsets[-1]} but the last "
                              f"commit is {commits[-1]}: more than one batch uncommitted")

    def unreadable(batch: int) -> CheckpointError | None:
        try:
            lines = cp.read_text("commits", str(batch)).splitlines()
            if len(lines) < 2 or not lines[0].startswith("v"):
                raise ValueError("no version line and commit record")
            if not isinstance(json.loads(lines[1]), dict):
                raise ValueError("the commit record is not an object")
        except (OSError, ValueError, UnicodeDecodeError, RecursionError) as e:
            return _unreadable(loc, "unparsable-commit", cp.describe("commits", str(batch)), e)
        return None

    if cp.local or len(commits) < 2:
        found: Iterable[CheckpointError | None] = map(unreadable, commits)
    else:  # one request per entry: at once, the first bad one in batch order still named
        with ThreadPoolExecutor(OBJECT_STORE_READERS, thread_name_prefix="commits") as pool:
            found = list(pool.map(unreadable, commits))
    bad = next((e for e in found if e is not None), None)
    if bad is not None:
        raise bad


def _partition_count(conf: dict[str, Any], loc: str, batch: int) -> int | None:
    if PARTITIONS_KEY not in conf:
        return None
    try:
        n = int(conf[PARTITIONS_KEY])
    except (TypeError, ValueError):
        n = 0
    if n < 1:
        raise CheckpointError(loc, "impossible-partitions", f"offsets/{batch} records "
                              f"{PARTITIONS_KEY}={conf[PARTITIONS_KEY]!r}: not a partition count")
    return n


def write_owner(location: str | Path, job: str, query_id: str, file_sink: str | None) -> None:
    """Record which job and query a checkpoint belongs to (next to Spark's files), and the
    path of the Spark file sink its query writes (None: no file sink), which a later
    repartition at start must extend (:func:`known_file_sink`)."""
    doc = {"job": job, "queryId": query_id, "fileSink": file_sink}
    store_of(str(location)).write_text(json.dumps(doc) + "\n", OWNER_FILE)


def known_file_sink(owner: dict[str, Any]) -> tuple[bool, str | None]:
    """``(known, path)``: whether the owner record says which Spark file sink the query
    writes (a record from before it was kept does not), and its path (None: none)."""
    if "fileSink" not in owner:
        return False, None
    sink = owner["fileSink"]
    return True, sink if isinstance(sink, str) and sink else None


def _owner(cp: CheckpointStore, loc: str) -> dict[str, Any]:
    if not cp.is_file(OWNER_FILE):
        return {}
    try:
        data = json.loads(cp.read_text(OWNER_FILE))
        if not isinstance(data, dict):
            raise ValueError("not an object")
        return data
    except (OSError, ValueError, UnicodeDecodeError, RecursionError) as e:
        raise _unreadable(loc, "unparsable-metadata", cp.describe(OWNER_FILE), e) from None


def _operators(cp: CheckpointStore) -> list[OperatorState]:
    return [OperatorState(int(name), cp.tree_bytes("state", name))
            for name in cp.listdir("state") if name.isdigit()]


LOCK_FILE = ".stream-autoscaler.lock"


class CheckpointLock:
    """An exclusive lock on a checkpoint for the life of a runner process.

    Two drivers on one checkpoint would race on its offsets and state; Spark only guards
    against that inside one session. ``flock`` is released by the kernel when the process dies
    (even by SIGKILL), so a killed runner never leaves a stale lock.

    An object store has no such lock (a lease would outlive a killed driver, and S3 offers no
    lock that dies with its holder): there ``held`` is False and one driver per checkpoint is the
    deployment's guarantee — in a cluster the controller runs one driver pod per StreamJob.
    """

    def __init__(self, location: str | Path) -> None:
        import fcntl

        self._fd = -1
        self.held = False
        if is_object_store(location):
            self.path: Path | None = None
            return
        cp = local_path(str(location))
        cp.mkdir(parents=True, exist_ok=True)
        self.path = cp / LOCK_FILE
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.read(self._fd, 200).decode(errors="replace").strip() or "another process"
            os.close(self._fd)
            raise CheckpointError(
                str(location), "in-use", f"a runner ({holder}) is using it"
            ) from None
        os.ftruncate(self._fd, 0)
        os.write(self._fd, f"pid {os.getpid()}\n".encode())
        self.held = True

    def release(self) -> None:
        import fcntl

        if self._fd >= 0:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = -1
            self.held = False
