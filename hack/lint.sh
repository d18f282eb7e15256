#!/usr/bin/env bash
# Static checks (`make lint`, and the first step of `make test`): style, strict types of every
# package and the benchmarks (pyproject.toml [tool.mypy]), the layering between packages and
# inside operators/ (import-linter: pyproject.toml [tool.importlinter], docs/architecture.md),
# and generated files that must not be stale.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
start=$SECONDS
"$VENV/bin/ruff" check app contracts controller operators tests benchmarks examples
"$VENV/bin/mypy" app contracts controller operators benchmarks
"$VENV/bin/lint-imports" --no-cache
"$VENV/bin/python" -m contracts.crds --check
echo "lint: ok in $((SECONDS - start)) s"
