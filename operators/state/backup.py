"""Back a checkpoint up at its last committed batch, and restore it.

Usage::

    backup(Path("/data/cp"), Path("/backups/cp-42"))   # copy as of the last committed batch
    restore(Path("/backups/cp-42"), Path("/data/cp"))  # the checkpoint must not exist

The query must be stopped (a running query keeps writing). A backup leaves out offsets and
commits newer than the last committed batch, so a restored checkpoint resumes exactly where the
backup was taken. Both build the copy in a temporary sibling and rename it into place: a failure
changes nothing at the destination.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import stat
import tempfile
from pathlib import Path

from operators.state.checkpoint import LOCK_FILE, CheckpointError, batches, inspect, local_path

BACKUP_FILE = "stream-autoscaler-backup.json"
MAX_MARKER_BYTES = 64 << 10
"""The backup's marker is one small JSON object; a larger one is not ours."""


def _only_files_and_directories(root: Path, location: str) -> None:
    """Refuse a tree holding anything but regular files and directories, before one byte is
    copied: a symbolic link would copy what it points at (a link to ``/etc`` copied host files,
    one to ``/dev/zero`` filled the disk), a FIFO would block the copy."""
    for dirpath, dirnames, filenames in os.walk(root):  # never follows links
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            mode = os.lstat(path).st_mode
            if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                what = "symbolic link" if stat.S_ISLNK(mode) else "special file"
                raise CheckpointError(location, "not-a-regular-file", f"{path} is a {what}: a "
                                      "checkpoint holds only files and directories; nothing "
                                      "was copied")


def backup(checkpoint: str | Path, dest: str | Path) -> int:
    """Copy ``checkpoint`` into ``dest`` (which must not exist); returns the batch backed up."""
    info = inspect(checkpoint)
    if info.last_committed_batch is None:
        raise CheckpointError(str(checkpoint), "no-committed-batch", "nothing to back up")
    src, out = local_path(str(checkpoint)), Path(dest)
    if out.exists():
        raise FileExistsError(f"{out} exists; choose a new backup directory")
    n = info.last_committed_batch
    _only_files_and_directories(src, str(checkpoint))
    # a directory of our own, made here: never one that already exists (".partial" used to be
    # removed first, and with it whatever a user kept under that name)
    tmp = Path(tempfile.mkdtemp(prefix=out.name + ".partial-", dir=out.parent)) / "copy"
    try:
        shutil.copytree(src, tmp, symlinks=True, ignore=_newer_than(src, n),
                        copy_function=_copy_keeping_holes)
        (tmp / BACKUP_FILE).write_text(
            json.dumps({"batch": n, "queryId": info.query_id, "source": str(src)}) + "\n",
            encoding="utf-8",
        )
        tmp.rename(out)
    finally:
        shutil.rmtree(tmp.parent, ignore_errors=True)  # ours; empty after the rename
    return n


def restore(backup_dir: str | Path, checkpoint: str | Path) -> int:
    """Restore a backup to ``checkpoint`` (which must not exist or be empty); returns its batch."""
    src = Path(backup_dir)
    marker = src / BACKUP_FILE
    if not marker.exists():
        raise CheckpointError(str(src), "not-a-backup", f"{marker} is missing")
    batch = _marked_batch(marker, str(src))
    inspect(src)  # a corrupt backup is refused before anything is written
    _only_files_and_directories(src, str(src))
    out = local_path(str(checkpoint))
    if out.exists() and any(out.iterdir()):
        raise FileExistsError(f"{out} is not empty; restore into a new location or remove it")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=out.name + ".restoring-", dir=out.parent)) / "copy"
    try:
        shutil.copytree(src, tmp, symlinks=True, ignore=shutil.ignore_patterns(BACKUP_FILE),
                        copy_function=_copy_keeping_holes)
        if out.exists():
            out.rmdir()
        tmp.rename(out)
    finally:
        shutil.rmtree(tmp.parent, ignore_errors=True)  # ours; empty after the rename
    return batch


def _marked_batch(marker: Path, location: str) -> int:
    """The batch the marker records; CheckpointError ``not-a-backup`` for anything else (a
    link, a huge or deep document, a batch that is not a non-negative integer)."""
    try:
        mode = os.lstat(marker).st_mode
        if not stat.S_ISREG(mode) or os.stat(marker).st_size > MAX_MARKER_BYTES:
            raise ValueError("not a small regular file")
        batch = json.loads(marker.read_text(encoding="utf-8"))["batch"]
        if not isinstance(batch, int) or isinstance(batch, bool) or batch < 0:
            raise ValueError(f"batch ({str(batch)[:40]}) is not a batch id")
        return batch
    except (OSError, ValueError, KeyError, TypeError, UnicodeDecodeError, RecursionError) as e:
        raise CheckpointError(location, "not-a-backup", f"{marker}: {e}") from None


COPY_CHUNK_BYTES = 1 << 20


def _copy_keeping_holes(src: str, dst: str) -> str:
    """``shutil.copy2`` that copies only a file's data extents (``SEEK_DATA``/``SEEK_HOLE``):
    a sparse file of 4 GiB with no data is copied in no time and takes no space, where a plain
    copy wrote 4 GiB of zeros (tests/unit/operators/state/test_checkpoint_tools.py::
    test_a_sparse_file_is_copied_as_holes). Files without holes copy as before."""
    with open(src, "rb") as fi, open(dst, "wb") as fo:
        fd, size = fi.fileno(), os.fstat(fi.fileno()).st_size
        try:
            pos: int | None = os.lseek(fd, 0, os.SEEK_DATA)
        except OSError as e:
            if e.errno != errno.ENXIO:  # the file system cannot tell: copy it whole
                shutil.copyfileobj(fi, fo, COPY_CHUNK_BYTES)
                shutil.copystat(src, dst)
                return dst
            pos = None  # ENXIO: no data at all
        while pos is not None and pos < size:
            end = os.lseek(fd, pos, os.SEEK_HOLE)
            fi.seek(pos)
            fo.seek(pos)
            while pos < end and (chunk := fi.read(min(end - pos, COPY_CHUNK_BYTES))):
                fo.write(chunk)
                pos += len(chunk)
            try:
                pos = os.lseek(fd, end, os.SEEK_DATA)
            except OSError:  # ENXIO: only a hole after this extent
                pos = None
        fo.truncate(size)
    shutil.copystat(src, dst)
    return dst


def _newer_than(root: Path, batch: int):  # type: ignore[no-untyped-def]
    """copytree ignore: offsets/commits entries (and their .crc) after ``batch``."""
    logs = {root / "offsets", root / "commits"}
    later = {str(b) for d in logs for b in batches(d) if b > batch}

    def ignore(directory: str, names: list[str]) -> set[str]:
        if Path(directory) == root:  # the lock, and a marker that is not ours to copy
            return {LOCK_FILE, BACKUP_FILE} & set(names)
        if Path(directory) not in logs:
            return set()
        return {n for n in names if n in later or (n.startswith(".") and n[1:-4] in later)}

    return ignore
