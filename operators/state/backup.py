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

import json
import shutil
import tempfile
from pathlib import Path

from operators.state.checkpoint import LOCK_FILE, CheckpointError, batches, inspect, local_path

BACKUP_FILE = "stream-autoscaler-backup.json"


def backup(checkpoint: str | Path, dest: str | Path) -> int:
    """Copy ``checkpoint`` into ``dest`` (which must not exist); returns the batch backed up."""
    info = inspect(checkpoint)
    if info.last_committed_batch is None:
        raise CheckpointError(str(checkpoint), "no-committed-batch", "nothing to back up")
    src, out = local_path(str(checkpoint)), Path(dest)
    if out.exists():
        raise FileExistsError(f"{out} exists; choose a new backup directory")
    n = info.last_committed_batch
    # a directory of our own, made here: never one that already exists (".partial" used to be
    # removed first, and with it whatever a user kept under that name)
    tmp = Path(tempfile.mkdtemp(prefix=out.name + ".partial-", dir=out.parent)) / "copy"
    try:
        shutil.copytree(src, tmp, ignore=_newer_than(src, n))
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
    batch = int(json.loads(marker.read_text(encoding="utf-8"))["batch"])
    inspect(src)  # a corrupt backup is refused before anything is written
    out = local_path(str(checkpoint))
    if out.exists() and any(out.iterdir()):
        raise FileExistsError(f"{out} is not empty; restore into a new location or remove it")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=out.name + ".restoring-", dir=out.parent)) / "copy"
    try:
        shutil.copytree(src, tmp, ignore=shutil.ignore_patterns(BACKUP_FILE))
        if out.exists():
            out.rmdir()
        tmp.rename(out)
    finally:
        shutil.rmtree(tmp.parent, ignore_errors=True)  # ours; empty after the rename
    return batch


def _newer_than(root: Path, batch: int):  # type: ignore[no-untyped-def]
    """copytree ignore: offsets/commits entries (and their .crc) after ``batch``."""
    logs = {root / "offsets", root / "commits"}
    later = {str(b) for d in logs for b in batches(d) if b > batch}

    def ignore(directory: str, names: list[str]) -> set[str]:
        if Path(directory) == root:
            return {LOCK_FILE} & set(names)
        if Path(directory) not in logs:
            return set()
        return {n for n in names if n in later or (n.startswith(".") and n[1:-4] in later)}

    return ignore
