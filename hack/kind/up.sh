#!/usr/bin/env bash
# `make kind-up`: a kind cluster with stream-autoscaler installed, reused when it exists.
#   1. the node image: kind's own when it can be pulled, else one built here from local parts
#      (hack/kind/node-image.sh; KIND_NODE_IMAGE overrides);
#   2. the cluster: one control plane, $KIND_WORKERS workers sharing $KIND_SHARED_DIR;
#   3. stream-autoscaler:dev built (as root on Debian: `make image`, no registry needed; else the
#      Dockerfile with the local engine) and loaded into the nodes;
#   4. the chart installed with hack/kind/values-kind.yaml.
# Each step says how long it took.
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
t0=$SECONDS
step() { # name, command...
  local name=$1 start=$SECONDS
  shift
  echo "kind-up: $name ..."
  "$@"
  echo "kind-up: $name done in $((SECONDS - start)) s"
}
if [[ -z "$KIND_NODE_IMAGE" ]]; then
  KIND_NODE_IMAGE=$("$KIND_DIR/node-image.sh" auto)
  export KIND_NODE_IMAGE
fi
step "cluster ($KIND_NODE_IMAGE)" "$KIND_DIR/create-cluster.sh"
if [[ $(id -u) == 0 && -x /usr/bin/apt-get ]]; then
  step "image" "$REPO_ROOT/hack/image/build.sh" build
  step "load image" "$KIND_DIR/load-image.sh" --no-build
else # a laptop: the Dockerfile on python:3.11-slim, with whatever engine it has
  step "image" "$KIND_DIR/load-image.sh"
fi
step "chart" "$KIND_DIR/install.sh"
echo "kind-up: ready in $((SECONDS - t0)) s (kubectl --context kind-$KIND_CLUSTER get streamjobs)"
