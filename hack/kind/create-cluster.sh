#!/usr/bin/env bash
# Create the kind cluster (reused when it exists). Needs kind and a container engine.
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
need kind kubectl

if kind get clusters 2>/dev/null | grep -qx "$KIND_CLUSTER"; then
  echo "kind cluster $KIND_CLUSTER exists"
else
  kind create cluster --name "$KIND_CLUSTER" --config "$KIND_DIR/kind-config.yaml" --wait 180s
fi
kubectl cluster-info --context "kind-$KIND_CLUSTER"
