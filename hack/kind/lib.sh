#!/usr/bin/env bash
# Shared settings of the kind scripts. Override any of them in the environment.
# shellcheck disable=SC2034  # read by the scripts that source this file
KIND_CLUSTER=${KIND_CLUSTER:-stream-autoscaler}
IMAGE=${IMAGE:-stream-autoscaler:dev}
NAMESPACE=${NAMESPACE:-stream-autoscaler-system}
RELEASE=${RELEASE:-stream-autoscaler}
REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
KIND_DIR="$REPO_ROOT/hack/kind"

need() { # fail early, with the tool's name, when a prerequisite is missing
  local tool
  for tool in "$@"; do
    if ! command -v "$tool" >/dev/null 2>&1; then
      echo "error: $tool not found on PATH (needed by $(basename "$0"))" >&2
      exit 1
    fi
  done
}
