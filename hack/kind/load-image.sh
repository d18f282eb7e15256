#!/usr/bin/env bash
# Build the image (controller and runner in one) and load it into the kind cluster's nodes.
#   hack/kind/load-image.sh [--no-build]   (--no-build: $IMAGE is already built, by `make image`)
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
need kind
engine=${CONTAINER_ENGINE:-docker}
need "$engine"

[[ ${1:-} == --no-build ]] || "$engine" build -t "$IMAGE" "$REPO_ROOT"
echo "loading $IMAGE into the nodes of $KIND_CLUSTER"
if [[ "$engine" == docker ]]; then
  kind load docker-image "$IMAGE" --name "$KIND_CLUSTER"
else # podman and others: go through an archive
  archive=$(mktemp --suffix=.tar)
  trap 'rm -f "$archive"' EXIT
  "$engine" save -o "$archive" "$IMAGE"
  kind load image-archive "$archive" --name "$KIND_CLUSTER"
fi
