#!/usr/bin/env python3
"""Download the jars a list names from Maven Central into a directory, each checked against
its pinned SHA-256 (the Dockerfile's `connector` stage; standard library only).

    python3 fetch_jars.py LIST DEST      (MAVEN_REPO overrides https://repo1.maven.org/maven2)

A TLS-intercepting proxy's CA is trusted through SSL_CERT_FILE (the build's `ca-bundle`
secret); it is read at run time and written nowhere.
"""

from __future__ import annotations

import hashlib
import os
import sys
import urllib.request
from pathlib import Path

REPO = os.environ.get("MAVEN_REPO", "https://repo1.maven.org/maven2").rstrip("/")


def entries(listing: Path) -> list[tuple[str, str]]:
    out = []
    for n, line in enumerate(listing.read_text(encoding="utf-8").splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split()
        if len(parts) != 2 or len(parts[1]) != 64:
            raise SystemExit(f"{listing}:{n}: expected '<maven2 path> <sha256>', got {line!r}")
        out.append((parts[0], parts[1].lower()))
    return out


def fetch(path: str, sha256: str, dest: Path) -> None:
    target = dest / path.rsplit("/", 1)[1]
    with urllib.request.urlopen(f"{REPO}/{path}", timeout=120) as r:
        data = r.read()
    got = hashlib.sha256(data).hexdigest()
    if got != sha256:
        raise SystemExit(f"{REPO}/{path}: SHA-256 {got}, the list pins {sha256}")
    target.write_bytes(data)
    print(f"fetch_jars: {target.name} ({len(data):,} bytes, SHA-256 checked)")


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    listing, dest = Path(argv[1]), Path(argv[2])
    dest.mkdir(parents=True, exist_ok=True)
    for path, sha in entries(listing):
        fetch(path, sha, dest)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
