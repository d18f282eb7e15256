#!/usr/bin/env bash
# Stop the processes hack/testbed/up.sh started (only those: pids and argv in .testbed/state.json).
# `down.sh --wipe` also deletes etcd's data, so the next `up` starts from an empty cluster.
set -euo pipefail
cd "$(dirname "$0")/../.."
py=python3
[[ -x .venv/bin/python ]] && py=.venv/bin/python
exec "$py" hack/testbed/testbed.py down "$@"
