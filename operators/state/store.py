"""Where a checkpoint lives — a local directory or an object store (``s3a://``) — behind one API.

Usage::

    cp = open_store("s3a://checkpoints/orders")     # or "/data/cp", "file:///data/cp"
    cp.listdir("offsets"), cp.read_text("metadata"), cp.files("state")

Spark reads and writes a checkpoint through Hadoop's FileSystem; the runner's own tools (inspect,
rollback of an unfinished repartition, repartition's snapshot, the batch in flight, the
exactly-once verifier) read it through :mod:`pyarrow.fs`, which pyspark already installs:
``LocalFileSystem`` and ``S3FileSystem`` answer the same calls, so one code path serves both.

An object store is reached with the settings the job gives Spark (``spark.hadoop.fs.s3a.*``,
handed over once by :func:`configure_object_store`) or, failing those, the AWS environment every
S3 client reads (``AWS_ENDPOINT_URL_S3`` / ``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``,
``AWS_SECRET_ACCESS_KEY``, ``AWS_REGION``): the same credentials Hadoop's default provider chain
finds in the driver pod, so secrets never pass through a manifest.
"""

from __future__ import annotations

import contextlib
import os
import stat
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlparse

from operators.errors import OperatorsError

if TYPE_CHECKING:
    from pyarrow.fs import FileSystem

OBJECT_STORE_SCHEMES = ("s3a", "s3")
"""URI schemes read through S3 (Hadoop's ``s3a``; ``s3`` as pyarrow and AWS write it)."""
HADOOP_S3A = "spark.hadoop.fs.s3a."
DEFAULT_REGION = "us-east-1"
"""S3-compatible servers (MinIO, moto, Ceph) accept any region; AWS needs the bucket's."""

_settings: dict[str, str] = {}
_settings_lock = threading.Lock()


MAX_LOG_FILE_BYTES = 16 << 20
"""What :meth:`CheckpointStore.read_text` reads at most: Spark's metadata, offsets and commit
entries are a few kB; a larger one (a sparse file, a link to ``/dev/zero``) is refused, never
read into memory."""


def redact(location: str) -> str:
    """``location`` without its userinfo (``s3a://KEY:SECRET@bucket/p`` -> ``s3a://***@bucket/p``):
    every error names the location, and no error may carry a secret."""
    netloc = urlparse(location).netloc
    if "@" not in netloc:
        return location
    return location.replace(netloc, "***@" + netloc.rsplit("@", 1)[1], 1)


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "symbolic link"
    if stat.S_ISFIFO(mode):
        return "FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "device"
    if stat.S_ISSOCK(mode):
        return "socket"
    return "directory" if stat.S_ISDIR(mode) else "special file"


class StoreError(OperatorsError, OSError):
    """A checkpoint location that cannot be opened (unknown scheme, unreachable store), or a
    file in it that is not one Spark wrote (too large, a link, a FIFO, a device)."""

    def __init__(self, location: str, problem: str, detail: str) -> None:
        location = redact(location)
        super().__init__(f"checkpoint {location}: {problem}: {detail}")
        self.location = location
        self.problem = problem
        self.detail = detail


def configure_object_store(conf: Mapping[str, str]) -> None:
    """Remember the job's ``spark.hadoop.fs.s3a.*`` settings for checkpoints on S3."""
    with _settings_lock:
        _settings.clear()
        _settings.update({k[len(HADOOP_S3A):]: str(v) for k, v in conf.items()
                          if k.startswith(HADOOP_S3A)})


def is_object_store(location: str | Path) -> bool:
    return urlparse(str(location)).scheme in OBJECT_STORE_SCHEMES


@dataclass(frozen=True)
class FileEntry:
    """One file of a checkpoint: its path relative to the root, size and modification time."""

    rel: str
    size: int
    mtime_ns: int


@dataclass(frozen=True)
class CheckpointStore:
    """A checkpoint's root on a file system; paths are ``/``-joined parts under it."""

    location: str
    fs: FileSystem
    root: str
    local: bool

    def path(self, *parts: str) -> str:
        return "/".join([self.root.rstrip("/"), *parts]) if parts else self.root

    def describe(self, *parts: str) -> str:
        """How a file is named in an error: the location the user gave (without userinfo),
        then the parts."""
        loc = redact(self.location)
        return "/".join([loc.rstrip("/"), *parts]) if parts else loc

    def _type(self, *parts: str) -> int:
        return int(self.fs.get_file_info(self.path(*parts)).type)

    def exists(self, *parts: str) -> bool:
        from pyarrow.fs import FileType

        return self._type(*parts) != int(FileType.NotFound)

    def is_dir(self, *parts: str) -> bool:
        from pyarrow.fs import FileType

        return self._type(*parts) == int(FileType.Directory)

    def is_file(self, *parts: str) -> bool:
        from pyarrow.fs import FileType

        return self._type(*parts) == int(FileType.File)

    def listdir(self, *parts: str) -> list[str]:
        """Names directly under ``parts`` ([] when it does not exist)."""
        from pyarrow.fs import FileSelector

        infos = self.fs.get_file_info(FileSelector(self.path(*parts), allow_not_found=True))
        return sorted(i.base_name for i in infos)

    def read_bytes(self, *parts: str, limit: int | None = None) -> bytes:
        """The file's bytes: locally a regular file only (a link, a FIFO or a device is
        refused before it is opened: a FIFO would block, ``/dev/zero`` never end); at most
        ``limit`` bytes (None: any size, for state files), else StoreError ``too-large``."""
        path = self.path(*parts)
        if self.local:
            mode = os.lstat(path).st_mode  # FileNotFoundError: an OSError, as before
            if not stat.S_ISREG(mode):
                raise StoreError(self.location, "not-a-regular-file",
                                 f"{self.describe(*parts)} is a {_kind(mode)}, not a file "
                                 "Spark wrote")
        with self.fs.open_input_stream(path) as f:
            data = f.read() if limit is None else f.read(limit + 1)
        if limit is not None and len(data) > limit:
            raise StoreError(self.location, "too-large", f"{self.describe(*parts)} is larger "
                             f"than {limit:,} bytes: not a log entry Spark wrote")
        return bytes(data)

    def read_text(self, *parts: str) -> str:
        """A log entry or metadata file (at most :data:`MAX_LOG_FILE_BYTES`), as UTF-8."""
        return self.read_bytes(*parts, limit=MAX_LOG_FILE_BYTES).decode("utf-8")

    def write_bytes(self, data: bytes, *parts: str) -> None:
        """Replace a file whole: locally a temporary sibling renamed into place; an object
        store's PUT is atomic already (readers see the old object or the new one)."""
        target = self.path(*parts)
        if self.local:
            tmp = target + ".tmp"
            with self.fs.open_output_stream(tmp) as f:
                f.write(data)
            self.fs.move(tmp, target)
            return
        with self.fs.open_output_stream(target) as f:
            f.write(data)

    def write_text(self, text: str, *parts: str) -> None:
        self.write_bytes(text.encode("utf-8"), *parts)

    def delete(self, *parts: str) -> None:
        """Remove a file; a missing one is fine."""
        from pyarrow.fs import FileType

        info = self.fs.get_file_info(self.path(*parts))
        if info.type == FileType.File:
            self.fs.delete_file(self.path(*parts))

    def files(self, *parts: str) -> list[FileEntry]:
        """Every file under ``parts`` (recursive), relative to the root."""
        from pyarrow.fs import FileSelector, FileType

        base = self.path(*parts)
        sel = FileSelector(base, recursive=True, allow_not_found=True)
        root = self.root.rstrip("/") + "/"
        return [
            FileEntry(i.path[len(root):] if i.path.startswith(root) else i.path,
                      int(i.size or 0), int(i.mtime_ns or 0))
            for i in self.fs.get_file_info(sel) if i.type == FileType.File
        ]

    def check_bucket(self) -> None:
        """On an object store: the bucket exists and answers (raises StoreError, or OSError
        when the store does not answer). Spark would otherwise fail at the first batch."""
        if self.local:
            return
        from pyarrow.fs import FileType

        bucket = self.root.split("/", 1)[0]
        if self.fs.get_file_info(bucket).type == FileType.NotFound:
            raise StoreError(self.location, "no-bucket", f"bucket {bucket!r} does not exist "
                             "(create it first: the runner never creates buckets)")

    def tree_bytes(self, *parts: str) -> int:
        return sum(f.size for f in self.files(*parts))

    def prune_empty_dirs(self, keep: set[str]) -> None:
        """Remove empty directories not named in ``keep`` (relative paths), deepest first.
        Only local: an object store has no directories, only keys."""
        if not self.local:
            return
        for dirpath, _dirs, _names in os.walk(self.root, topdown=False):
            rel = os.path.relpath(dirpath, self.root)
            if rel == "." or rel in keep or any(k.startswith(rel + os.sep) for k in keep):
                continue
            with contextlib.suppress(OSError):  # not empty
                os.rmdir(dirpath)


def open_store(location: str | Path) -> CheckpointStore:
    """The file system and root of a checkpoint location (path, ``file:`` or ``s3a://`` URI).

    Raises :class:`StoreError` for a scheme we cannot read (``hdfs://``, ``gs://``, ...).
    """
    loc = str(location)
    parsed = urlparse(loc)
    if parsed.scheme in OBJECT_STORE_SCHEMES:
        if "@" in parsed.netloc:
            raise StoreError(loc, "credentials-in-location", "keys do not belong in a location; "
                             "give them in a Secret (spec.checkpoint.credentials) or the AWS "
                             "environment")
        if not parsed.netloc:
            raise StoreError(loc, "no-bucket", "an s3a:// location names a bucket: s3a://BUCKET/path")
        return CheckpointStore(loc, _s3(loc), f"{parsed.netloc}{parsed.path}".rstrip("/"), False)
    if parsed.scheme == "file":
        path = parsed.path
    elif parsed.scheme == "" or (len(parsed.scheme) == 1 and os.name == "nt"):
        path = loc
    else:
        raise StoreError(loc, "unsupported-scheme",
                         f"{parsed.scheme}:// checkpoints cannot be read here (a directory, "
                         "file:// or s3a:// can)")
    from pyarrow.fs import LocalFileSystem

    return CheckpointStore(loc, LocalFileSystem(), os.path.abspath(path), True)


def _s3(location: str) -> FileSystem:
    """An S3 client from the job's s3a settings, else the AWS environment."""
    from pyarrow.fs import S3FileSystem

    with _settings_lock:
        s = dict(_settings)
    endpoint = (s.get("endpoint") or os.environ.get("AWS_ENDPOINT_URL_S3")
                or os.environ.get("AWS_ENDPOINT_URL") or "")
    kwargs: dict[str, object] = {
        "region": s.get("endpoint.region") or os.environ.get("AWS_REGION") or DEFAULT_REGION,
        "connect_timeout": 5.0,
        "request_timeout": 30.0,
    }
    if endpoint:
        parsed = urlparse(endpoint if "://" in endpoint else f"//{endpoint}")
        ssl = s.get("connection.ssl.enabled", "true").lower() != "false"
        kwargs["endpoint_override"] = parsed.netloc
        kwargs["scheme"] = parsed.scheme or ("https" if ssl else "http")
    if s.get("access.key") and s.get("secret.key"):
        kwargs["access_key"], kwargs["secret_key"] = s["access.key"], s["secret.key"]
    elif os.environ.get("AWS_ACCESS_KEY_ID") and os.environ.get("AWS_SECRET_ACCESS_KEY"):
        # what the default chain would find first, given explicitly: left to the chain, the
        # SDK also asks the instance metadata service, which a pod with no route to it waits
        # out for ~6 s at every client (tests/unit/operators/state/test_store.py::
        # test_keys_in_the_environment_never_wait_for_the_instance_metadata_service)
        kwargs["access_key"] = os.environ["AWS_ACCESS_KEY_ID"]
        kwargs["secret_key"] = os.environ["AWS_SECRET_ACCESS_KEY"]
        if os.environ.get("AWS_SESSION_TOKEN"):
            kwargs["session_token"] = os.environ["AWS_SESSION_TOKEN"]
    if s.get("path.style.access", "").lower() == "false":
        kwargs["force_virtual_addressing"] = True
    try:
        return S3FileSystem(**kwargs)
    except (OSError, ValueError) as e:
        raise StoreError(location, "unreachable", str(e)) from None
