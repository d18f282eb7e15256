#!/usr/bin/env bash
# Build the image (controller and runner in one) and load it into the kind cluster's nodes.
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
need kind
engine=${CONTAINER_ENGINE:-docker}
need "$engine"

"$engine" build -t "$IMAGE" "$REPO_ROOT"
if [[ "$engine" == docker ]]; then
  kind load docker-image "$IMAGE" --name "$KIND_CLUSTER"
else # podman and others: go through an archive
  archive=$(mktemp --suffix=.tar)
  trap 'rm -f "$archive"' EXIT
  "$engine" save -o "$archive" "$IMAGE"
  kind load image-archive "$archive" --name "$KIND_CLUSTER"
fi
