"""The RocksDB store's own key count (operators/state/rows.py::committed_keys) on checkpoint
files laid out as Spark writes them, and every case where it must say nothing so that the
caller reads the rows instead. Against Spark's own files and the rows read back:
tests/integration/spark_pipelines/test_state_counts.py."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

import pytest

from operators.state.rows import committed_keys
from operators.state.store import open_store


def write_version(cp: Path, op: int, part: int, version: int, meta: Any, *,
                  store: str | None = None, raw: str | None = None) -> None:
    d = cp / "state" / str(op) / str(part)
    if store:
        d = d / store
    d.mkdir(parents=True, exist_ok=True)
    (d / "SSTs").mkdir(exist_ok=True)
    (d / "SSTs" / "000001-x.sst").write_bytes(b"sst")
    with zipfile.ZipFile(d / f"{version}.zip", "w") as z:
        z.writestr("CURRENT", "MANIFEST-000001\n")
        z.writestr("metadata", raw if raw is not None else "v1\n" + json.dumps(meta))
    (d / f".{version}.zip.crc").write_bytes(b"crc")


def meta(keys: int, ssts: int = 1, **extra: Any) -> dict[str, Any]:
    files = [{"localFileName": f"{i:06}.sst", "dfsSstFileName": f"{i:06}-x.sst",
              "sizeBytes": 10} for i in range(ssts)]
    return {"sstFiles": files, "numKeys": keys, "numInternalKeys": 0,
            "columnFamilyMapping": {}, "maxColumnFamilyId": 0, **extra}


def count(cp: Path, batch: int, partitions: int) -> dict[int, int] | None:
    store = open_store(str(cp))
    return committed_keys(store, [f.rel for f in store.files()], batch, partitions)


def test_the_keys_of_every_partition_at_the_batchs_version_per_operator(tmp_path: Path) -> None:
    for part, keys in enumerate((40, 60)):
        write_version(tmp_path, 0, part, 8, meta(keys + 1))  # batch 6's state: not asked for
        write_version(tmp_path, 0, part, 9, meta(keys))       # batch 8 commits version 9
    write_version(tmp_path, 1, 0, 9, meta(7))
    write_version(tmp_path, 1, 1, 9, meta(0, ssts=0))         # an empty partition: 0, no SST
    (tmp_path / "state" / "0" / "_metadata").mkdir()
    (tmp_path / "state" / "0" / "_metadata" / "metadata").write_text("v2")
    assert count(tmp_path, 8, 2) == {0: 100, 1: 7}
    assert count(tmp_path, 7, 2) is None  # operator 1 holds no version 8: nothing said
    for part in (0, 1):
        write_version(tmp_path, 1, part, 8, meta(3))
    assert count(tmp_path, 7, 2) == {0: 102, 1: 6}


@pytest.mark.parametrize("case", [
    "a partition without the version",    # changelog checkpointing, format 2's unique names
    "a partition past the count",         # files the layout does not explain
    "a store per side",                   # a stream-stream join
    "column families",                    # transformWithState
    "untracked rows",                     # numKeys 0 beside SST files
    "not a zip",
    "no metadata entry",
    "a metadata entry of another shape",
    "no state at all",
])
def test_what_the_files_cannot_say_is_left_to_the_scan(tmp_path: Path, case: str) -> None:
    parts = 2
    if case != "no state at all":
        write_version(tmp_path, 0, 0, 5, meta(10))
    if case == "a partition without the version":
        write_version(tmp_path, 0, 1, 4, meta(10))
    else:
        write_version(tmp_path, 0, 1, 5, meta(10))
    if case == "a partition past the count":
        write_version(tmp_path, 0, 2, 5, meta(10))
    elif case == "a store per side":
        write_version(tmp_path, 0, 0, 5, meta(3), store="left-keyToNumValues")
    elif case == "column families":
        write_version(tmp_path, 0, 1, 5, meta(10, columnFamilyMapping={"cf": 1}))
    elif case == "untracked rows":
        write_version(tmp_path, 0, 1, 5, meta(0, ssts=2))
    elif case == "not a zip":
        (tmp_path / "state" / "0" / "1" / "5.zip").write_bytes(b"not a zip")
    elif case == "no metadata entry":
        with zipfile.ZipFile(tmp_path / "state" / "0" / "1" / "5.zip", "w") as z:
            z.writestr("CURRENT", "x")
    elif case == "a metadata entry of another shape":
        write_version(tmp_path, 0, 1, 5, None, raw='v1\n{"numKeys": "ten", "sstFiles": []}')
    if case == "no state at all":
        (tmp_path / "offsets").mkdir(parents=True)
    assert count(tmp_path, 4, parts) is None, case
