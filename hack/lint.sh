#!/usr/bin/env bash
# Static checks (`make lint`, and the first step of `make test`): style, strict types of every
# package and the benchmarks (pyproject.toml [tool.mypy]), the layering between packages and
# inside operators/ (import-linter: pyproject.toml [tool.importlinter], docs/architecture.md),
# generated files that must not be stale, and the chart (`helm lint --strict`: a warning fails).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
start=$SECONDS
"$VENV/bin/ruff" check app contracts controller operators tests benchmarks examples
"$VENV/bin/mypy" app contracts controller operators benchmarks
"$VENV/bin/lint-imports" --no-cache
"$VENV/bin/python" -m contracts.crds --check
# helm is a test-bed tool (make tools builds it from its Go module, cached): `make test` builds it
# before this runs; a plain `make lint` before any `make tools` says so, and fails in CI.
# shellcheck source=tools/versions.env
source hack/tools/versions.env
helm_bin=${SA_TOOLS_BIN:-${XDG_CACHE_HOME:-$HOME/.cache}/stream-autoscaler/bin}/helm-$HELM_VERSION
if [[ -x "$helm_bin" ]]; then
  helm_home=.testbed/helm
  HELM_CACHE_HOME=$helm_home/cache HELM_CONFIG_HOME=$helm_home/config HELM_DATA_HOME=$helm_home/data \
    "$helm_bin" lint --strict --quiet helm/stream-autoscaler
else
  echo "lint: no $helm_bin to lint the chart with (make tools builds it)" >&2
  case "${CI:-}" in 1 | true | TRUE | yes) exit 1 ;; esac
fi
echo "lint: ok in $((SECONDS - start)) s"
