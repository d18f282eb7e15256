#!/usr/bin/env bash
# The whole test suite: lint, the pure core, adapters against real components, burst scenarios.
# In CI (CI=true) a missing real component fails the run instead of skipping.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
"$VENV/bin/ruff" check controller operators tests benchmarks
"$VENV/bin/mypy" controller/core
"$VENV/bin/python" -m pytest tests "$@"
