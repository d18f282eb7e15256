#!/usr/bin/env bash
# Delete the kind cluster.
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
need kind
kind delete cluster --name "$KIND_CLUSTER"
