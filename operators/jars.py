"""Jars a job puts on ``spark.jars`` that pyspark does not ship (Kafka's connector, S3A).

Each set is resolved from Maven Central by its ``hack/tools/<name>/resolve.sh`` (``make tools``)
into ``~/.cache/stream-autoscaler/<name>/<dirname>/``, with a ``.stamp`` written last, so a
half-finished resolve is never used. An environment variable names them instead (the image sets
it to the jars it bakes in): a directory of jars or comma-separated jar paths.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class JarSet:
    """Where one set of jars is looked for."""

    what: str
    """What the jars are, for errors ("Spark's Kafka connector jars")."""
    env: str
    """The variable that names them instead of the cache (a directory or comma-separated jars)."""
    cache_env: str
    """The variable that moves the cache directory (tests point it elsewhere)."""
    cache_name: str
    """The cache's subdirectory under ~/.cache/stream-autoscaler (``kafka``, ``s3a``)."""
    dirname: str
    """The resolved set's directory, named by its version (``spark-kafka-4.2.0``)."""
    script: str
    """The script that resolves them (``hack/tools/kafka/resolve.sh``)."""

    def paths(self) -> list[str]:
        """Local paths of the jars; ValueError naming the variable or the cache when missing."""
        override = os.environ.get(self.env, "").strip()
        if override:
            paths = [Path(p.strip()) for p in override.split(",") if p.strip()]
            if len(paths) == 1 and paths[0].is_dir():
                paths = sorted(paths[0].glob("*.jar"))
            missing = [str(p) for p in paths if not p.is_file()]
            if missing or not paths:
                raise ValueError(f"{self.env}: no such jar(s): {', '.join(missing) or override}")
            return [str(p) for p in paths]
        base = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "stream-autoscaler"
        d = Path(os.environ.get(self.cache_env, base / self.cache_name)) / self.dirname
        jars = sorted(d.glob("*.jar")) if (d / ".stamp").exists() else []
        if not jars:
            raise ValueError(
                f"{self.what} are not resolved in {d}: run `make tools` ({self.script}) or set "
                f"{self.env}"
            )
        return [str(p) for p in jars]
