"""State primitives for the SEEP move: inspect, back up, restore and repartition a checkpoint.

Usage::

    from operators import state
    info = state.inspect("/data/cp")                 # CheckpointError if corrupt or foreign
    state.backup("/data/cp", "/backups/cp-42")
    state.repartition(spark, "/data/cp", 8)          # the query must be stopped
"""

from operators.state.backup import backup, restore
from operators.state.checkpoint import (
    CheckpointError,
    CheckpointInfo,
    CheckpointLock,
    OperatorState,
    inspect,
    known_file_sink,
    partitions_of,
    write_owner,
)
from operators.state.repartition import (
    RepartitionError,
    RepartitionResult,
    file_sink_path,
    repartition,
    rollback_unfinished,
    sink_never_committed,
)
from operators.state.rows import state_rows
from operators.state.store import CheckpointStore, configure_object_store, open_store

__all__ = [
    "CheckpointError",
    "CheckpointInfo",
    "CheckpointLock",
    "CheckpointStore",
    "OperatorState",
    "RepartitionError",
    "RepartitionResult",
    "backup",
    "configure_object_store",
    "file_sink_path",
    "inspect",
    "known_file_sink",
    "open_store",
    "partitions_of",
    "repartition",
    "restore",
    "rollback_unfinished",
    "sink_never_committed",
    "state_rows",
    "write_owner",
]
