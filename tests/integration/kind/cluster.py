"""The kind tier's cluster, started as early as its pytest session knows it will run.

Bringing the cluster up (`hack/kind/up.sh`: three node containers, kubeadm, the image loaded into
the workers, the chart) takes ~3 minutes, most of it waiting on containers, kubeadm and image
imports. When the tier runs in a session with other tiers before it (`make test`'s Spark lane:
the Kafka and Spark runtime tiers first), ``conftest.py`` starts it at the end of collection, in the
background, and the tier's ``kind`` fixture waits for it; alone, the fixture starts it itself.
Either way the cluster starts from none (a cluster of that name left by an interrupted run
holds its pods) and is deleted at the end of the tier's module, or of the session when the
tier never ran.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from tests.realcomponents import REPO

CLUSTER = "sa-kind-tier"
UP_TIMEOUT_SECONDS = 1500
"""Cold: the root filesystem (~70 s), the node image (~60 s), the image (`make image`, cached by
the prepare step) and its load into the two workers (~60 s on a loaded machine)."""
DELETE = [str(REPO / "hack" / "kind" / "delete-cluster.sh")]


@dataclass
class TierCluster:
    """One ``delete-cluster.sh && up.sh`` for the tier's cluster, in the background."""

    shared: Path = REPO / ".kind" / f"{CLUSTER}-shared"
    """The directory every worker mounts (the checkpoint volume); emptied at each start, kept
    after the run for a look."""
    proc: subprocess.Popen[str] | None = None
    log: Path | None = None
    started: float = 0.0
    deleted: bool = False

    @property
    def env(self) -> dict[str, str]:
        env = {**os.environ, "KIND_CLUSTER": CLUSTER, "KIND_SHARED_DIR": str(self.shared)}
        env.pop("KIND_NODE_IMAGE", None)
        return env

    def start(self) -> None:
        if self.proc is not None:
            return
        shutil.rmtree(self.shared, ignore_errors=True)
        self.shared.mkdir(parents=True)
        self.log = self.shared.parent / f"{CLUSTER}-up.log"
        up = f"{DELETE[0]} >/dev/null 2>&1; exec {REPO / 'hack' / 'kind' / 'up.sh'}"
        self.started = time.monotonic()
        with self.log.open("w") as out:  # the child keeps its own descriptor
            self.proc = subprocess.Popen(["bash", "-c", up], stdout=out,
                                         stderr=subprocess.STDOUT, env=self.env, text=True,
                                         start_new_session=True)

    def wait(self) -> tuple[int, str]:
        """(up.sh's exit status, its output); waits at most :data:`UP_TIMEOUT_SECONDS` from the
        start."""
        self.start()
        assert self.proc is not None and self.log is not None
        left = UP_TIMEOUT_SECONDS - (time.monotonic() - self.started)
        try:
            rc = self.proc.wait(max(left, 1.0))
        except subprocess.TimeoutExpired:
            self.stop()
            rc = -1
        text = self.log.read_text()
        return rc, f"{text}\nkind up in {time.monotonic() - self.started:.0f} s"

    def stop(self) -> None:
        """Ends an up.sh still running, and deletes the cluster (once)."""
        if self.proc is None or self.deleted:
            return
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, 15)
            self.proc.wait(60)
        subprocess.run(DELETE, capture_output=True, env=self.env, timeout=300)
        self.deleted = True


TIER = TierCluster()
"""The session's one cluster of the tier."""
