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
# Only the workers: kubeadm taints the control plane NoSchedule, so our pods never land there
# (a cluster of a control plane alone gets the image on it). Each node imports the whole image.
need kubectl
nodes=$(kubectl --context "kind-$KIND_CLUSTER" get nodes -l '!node-role.kubernetes.io/control-plane' \
  -o jsonpath='{range .items[*]}{.metadata.name}{","}{end}')
nodes=${nodes%,}
echo "loading $IMAGE into the nodes of $KIND_CLUSTER that run pods: ${nodes:-all}"
where=(--name "$KIND_CLUSTER")
[[ -n "$nodes" ]] && where+=(--nodes "$nodes")
if [[ "$engine" == docker ]]; then
  kind load docker-image "$IMAGE" "${where[@]}"
else # podman and others: go through an archive
  archive=$(mktemp --suffix=.tar)
  trap 'rm -f "$archive"' EXIT
  "$engine" save -o "$archive" "$IMAGE"
  kind load image-archive "$archive" "${where[@]}"
fi
