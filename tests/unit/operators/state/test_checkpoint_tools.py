"""Checkpoint tooling tells the truth: corrupt logs are named, a backup never
deletes what it did not create, a full disk leaves nothing half-written, and a repartition's
arguments are checked before Spark starts. Checkpoints here are written as Spark writes them
(version line + JSON); no Spark runs."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from operators.driver import cli
from operators.state import (
    CheckpointError,
    backup,
    inspect,
    known_file_sink,
    restore,
    write_owner,
)
from operators.state.checkpoint import OWNER_FILE
from tests.realcomponents import unavailable

QUERY = "4f1c2d3e-0000-4000-8000-000000000001"


def checkpoint(root: Path, offsets: range | list[int], commits: range | list[int],
               partitions: object = 4) -> Path:
    cp = root / "cp"
    (cp / "offsets").mkdir(parents=True)
    (cp / "commits").mkdir()
    (cp / "metadata").write_text(json.dumps({"id": QUERY}) + "\n")
    meta = {"batchWatermarkMs": 0, "batchTimestampMs": 1,
            "conf": {"spark.sql.shuffle.partitions": str(partitions)}}
    for b in offsets:
        (cp / "offsets" / str(b)).write_text(f"v1\n{json.dumps(meta)}\n{{\"main\": {b * 10}}}\n")
    for b in commits:
        (cp / "commits" / str(b)).write_text('v1\n{"nextBatchWatermarkMs":0}\n')
    return cp


def test_a_healthy_checkpoint_with_one_batch_in_flight(tmp_path: Path) -> None:
    info = inspect(checkpoint(tmp_path, range(3, 8), range(3, 7)))
    assert (info.last_committed_batch, info.last_offsets_batch, info.partitions) == (6, 7, 4)


@pytest.mark.parametrize(
    ("sink", "known"),
    [("/data/out", (True, "/data/out")), (None, (True, None))],
    ids=["a-file-sink", "no-file-sink"],
)
def test_the_owner_record_names_the_file_sink_a_repartition_must_extend(
    tmp_path: Path, sink: str | None, known: tuple[bool, str | None]
) -> None:
    """The runner records the query's Spark file sink (or that there is none) at every start,
    so a recovery that repartitions at start knows it without a one-batch run; a record
    written before the field existed says nothing either way."""
    cp = checkpoint(tmp_path, range(3, 6), range(3, 6))
    write_owner(cp, "rt", QUERY, sink)
    info = inspect(cp)
    assert info.owner["job"] == "rt" and known_file_sink(info.owner) == known
    (cp / OWNER_FILE).write_text(json.dumps({"job": "rt", "queryId": QUERY}))
    assert known_file_sink(inspect(cp).owner) == (False, None)


@pytest.mark.parametrize(
    ("offsets", "commits", "partitions", "corrupt", "problem", "message"),
    [
        (range(0, 5), range(0, 5), 4, "commits/4:", "unparsable-commit", "commits/4"),
        (range(0, 5), range(0, 5), 4, "commits/2:garbage", "unparsable-commit", "commits/2"),
        ([0, 1, 3, 4], [0, 1, 3], 4, None, "gap-in-log", "batch(es) 2 missing"),
        (range(0, 6), range(0, 3), 4, None, "gap-in-log", "more than one batch uncommitted"),
        (range(0, 3), range(0, 3), -4, None, "impossible-partitions",
         "spark.sql.shuffle.partitions='-4'"),
    ],
    ids=["empty-commit", "garbage-commit", "gap", "offsets-far-ahead", "negative-partitions"],
)
def test_corruption_is_named(
    tmp_path: Path, offsets: list[int], commits: list[int], partitions: object,
    corrupt: str | None, problem: str, message: str,
) -> None:
    cp = checkpoint(tmp_path, offsets, commits, partitions)
    if corrupt:
        name, _, content = corrupt.partition(":")
        (cp / name).write_text(content)
    with pytest.raises(CheckpointError) as e:
        inspect(cp)
    assert e.value.problem == problem
    assert message in str(e.value)


def test_backup_never_deletes_what_it_did_not_create(tmp_path: Path) -> None:
    cp = checkpoint(tmp_path, range(0, 3), range(0, 3))
    keep = tmp_path / "bk.partial"  # a user's own directory with the old scratch name
    keep.mkdir()
    (keep / "precious.txt").write_text("mine")
    assert backup(cp, tmp_path / "bk") == 2
    assert (keep / "precious.txt").read_text() == "mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bk", "bk.partial", "cp"]
    assert restore(tmp_path / "bk", tmp_path / "restored") == 2
    assert inspect(tmp_path / "restored").last_committed_batch == 2


def test_a_full_disk_leaves_nothing_half_written(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        unavailable("mounting a size-capped tmpfs needs root")
    cp = checkpoint(tmp_path, range(0, 3), range(0, 3))
    (cp / "state").mkdir()
    (cp / "state" / "big.sst").write_bytes(os.urandom(256 * 1024))
    small = tmp_path / "small"
    small.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=128k", "tmpfs", str(small)], check=True)
    try:
        code = cli.checkpoint_main(["backup", str(cp), str(small / "bk")])
        assert code == 2
        assert list(small.iterdir()) == []  # no partial copy, no scratch directory
    finally:
        subprocess.run(["umount", str(small)], check=True)


def test_repartition_checks_its_arguments_before_starting_spark(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def no_spark() -> None:
        raise AssertionError("Spark started before the arguments were checked")

    monkeypatch.setattr(cli, "_local_spark", no_spark)
    cp = checkpoint(tmp_path, range(0, 3), range(0, 3))
    for bad in ("0", "-4", "100000"):
        assert cli.checkpoint_main(["repartition", str(cp), bad]) == 2
        assert f"partitions ({int(bad)}): an integer in 1..4096" in capsys.readouterr().err


def test_a_crash_between_sparks_write_and_our_check_is_undone_at_the_next_start(
    tmp_path: Path,
) -> None:
    """Spark wrote offsets/N+1 with the new count, then the runner died before verifying it:
    the next start removes that unfinished repartition (and only that) and resumes on the old
    count; a normal in-flight batch (same count) is left for Spark to replay."""
    from operators.state import rollback_unfinished

    cp = checkpoint(tmp_path, range(0, 4), range(0, 3), partitions=4)  # batch 3: in flight
    assert rollback_unfinished(str(cp)) is None and (cp / "offsets" / "3").exists()
    meta = {"batchWatermarkMs": 0, "conf": {"spark.sql.shuffle.partitions": "8"}}
    (cp / "offsets" / "3").write_text(f"v1\n{json.dumps(meta)}\n{{\"main\": 30}}\n")
    assert rollback_unfinished(str(cp)) == 3
    info = inspect(cp)
    assert (info.last_offsets_batch, info.last_committed_batch, info.partitions) == (2, 2, 4)


# --- hostile checkpoints: bounded reads, no links followed, no tracebacks, no secrets --------


def _replace(cp: Path, rel: str, make: str) -> None:
    """Replace ``cp/rel`` by something Spark never writes."""
    target = cp / rel
    target.unlink()
    if make == "dev-zero":
        target.symlink_to("/dev/zero")
    elif make == "sparse":
        with target.open("wb") as f:
            f.truncate(64 << 30)  # 64 GiB of holes: a read would fill memory
    elif make == "fifo":
        os.mkfifo(target)  # a read would block for ever
    elif make == "deep":
        target.write_text("[" * 100_000 + "]" * 100_000)
    elif make == "conf-list":
        target.write_text('v1\n{"batchWatermarkMs": 0, "conf": ["spark.sql.shuffle.partitions"]}'
                          '\n{"main": 0}\n')
    elif make == "id-object":
        target.write_text('{"id": {"x": 1}}\n')


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    ("rel", "make", "problem"),
    [("metadata", "dev-zero", "not-a-regular-file"), ("metadata", "sparse", "too-large"),
     ("offsets/3", "fifo", "not-a-regular-file"), ("commits/2", "dev-zero", "not-a-regular-file"),
     ("metadata", "deep", "unparsable-metadata"), ("offsets/3", "deep", "unparsable-offsets"),
     ("offsets/3", "conf-list", "unparsable-offsets"), ("metadata", "id-object",
                                                         "unparsable-metadata")],
    ids=["metadata-dev-zero", "metadata-sparse", "offsets-fifo", "commit-dev-zero",
         "metadata-deep-json", "offsets-deep-json", "offsets-conf-not-object",
         "metadata-id-not-string"],
)
def test_a_hostile_file_is_refused_by_name_without_reading_it_whole(
    tmp_path: Path, rel: str, make: str, problem: str, capsys: pytest.CaptureFixture[str]
) -> None:
    cp = checkpoint(tmp_path, range(0, 4), range(0, 3))
    _replace(cp, rel, make)
    with pytest.raises(CheckpointError) as e:
        inspect(cp)
    assert e.value.problem == problem, str(e.value)
    assert rel.split("/")[0] in str(e.value)
    assert cli.checkpoint_main(["inspect", str(cp)]) == 2  # an error line, no traceback
    assert "Traceback" not in capsys.readouterr().err


@pytest.mark.timeout(30)
def test_a_far_batch_id_is_one_gap_not_a_set_of_every_missing_id(tmp_path: Path) -> None:
    cp = checkpoint(tmp_path, [0, 100_000_000], [])
    with pytest.raises(CheckpointError) as e:
        inspect(cp)
    assert e.value.problem == "gap-in-log" and "1, 2, 3, 4, 5 missing" in str(e.value)


@pytest.mark.parametrize("link_to", ["/etc", "/dev/zero"])
def test_a_backup_refuses_links_before_copying_anything(tmp_path: Path, link_to: str) -> None:
    cp = checkpoint(tmp_path, range(0, 3), range(0, 3))
    (cp / "state").mkdir()
    (cp / "state" / "host").symlink_to(link_to)
    dest = tmp_path / "backup"
    with pytest.raises(CheckpointError) as e:
        backup(cp, dest)
    assert e.value.problem == "not-a-regular-file" and "symbolic link" in str(e.value)
    assert not dest.exists() and not list(tmp_path.glob("backup.partial-*"))


@pytest.mark.parametrize(
    "marker",
    ['{"batch": "x"}', '{"batch": true}', '{"batch": -1}', "[1]", "[" * 50_000, "{}",
     '{"batch": 1e999}'],
    ids=["string", "bool", "negative", "array", "deep", "no-batch", "infinite"],
)
def test_an_odd_restore_marker_is_not_a_backup(
    tmp_path: Path, marker: str, capsys: pytest.CaptureFixture[str]
) -> None:
    cp = checkpoint(tmp_path, range(0, 3), range(0, 3))
    (cp / "stream-autoscaler-backup.json").write_text(marker)
    out = tmp_path / "restored"
    with pytest.raises(CheckpointError) as e:
        restore(cp, out)
    assert e.value.problem == "not-a-backup"
    assert not out.exists()
    assert cli.checkpoint_main(["restore", str(cp), str(out)]) == 2
    assert "Traceback" not in capsys.readouterr().err


def test_keys_in_an_s3a_location_are_refused_and_never_echoed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(CheckpointError) as e:
        inspect("s3a://AKIAEXAMPLE:wJalrSECRETKEY@bucket/cp")
    assert e.value.problem == "credentials-in-location"
    assert "SECRETKEY" not in str(e.value) and "AKIAEXAMPLE" not in str(e.value)
    assert cli.checkpoint_main(["inspect", "s3a://AKIAEXAMPLE:wJalrSECRETKEY@bucket/cp"]) == 2
    err = capsys.readouterr().err
    assert "SECRETKEY" not in err and "***@bucket" in err, err


def test_a_sparse_file_is_copied_as_holes(tmp_path: Path) -> None:
    """A 4 GiB file of holes with a little data (as a hostile author can leave in their
    checkpoint) is backed up and restored as holes: the same bytes, no 4 GiB written."""
    cp = checkpoint(tmp_path, range(0, 3), range(0, 3))
    (cp / "state" / "0" / "0").mkdir(parents=True)
    sparse = cp / "state" / "0" / "0" / "1.delta"
    with open(sparse, "wb") as f:
        f.seek(1 << 30)
        f.write(b"data in the middle")
        f.truncate(4 << 30)
    backup(cp, tmp_path / "backup")
    restore(tmp_path / "backup", tmp_path / "restored")
    for copy in (tmp_path / "backup", tmp_path / "restored"):
        got = copy / "state" / "0" / "0" / "1.delta"
        assert got.stat().st_size == 4 << 30
        assert got.stat().st_blocks * 512 < 16 << 20, "the holes were written out"
        with open(got, "rb") as f:
            f.seek(1 << 30)
            assert f.read(18) == b"data in the middle"


def test_a_stale_marker_in_a_checkpoint_is_not_copied(tmp_path: Path) -> None:
    """``stream-autoscaler-backup.json`` in a checkpoint (even a directory of that name) is not
    part of it: the backup writes its own marker, and nothing raises."""
    cp = checkpoint(tmp_path, range(0, 3), range(0, 3))
    (cp / "stream-autoscaler-backup.json").mkdir()
    assert backup(cp, tmp_path / "backup") == 2
    marker = json.loads((tmp_path / "backup" / "stream-autoscaler-backup.json").read_text())
    assert marker["batch"] == 2
