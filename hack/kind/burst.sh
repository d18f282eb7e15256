#!/usr/bin/env bash
# Apply the sample StreamJob with the burst source and watch the controller scale it.
#   hack/kind/burst.sh [manifest]      (default: k8s/samples/streamjob-burst.yaml; Ctrl-C stops)
# `make kind-burst` does the same with a report at the end (app/kind_burst.py).
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
need kubectl

manifest=${1:-$REPO_ROOT/k8s/samples/streamjob-burst.yaml}
ctx=(--context "kind-$KIND_CLUSTER")
# The checkpoint claim the sample mounts, bound to a ReadWriteMany volume over the directory
# every worker mounts (create-cluster.sh), writable by the image's user (10001).
mkdir -p "$KIND_SHARED_DIR"
chown 10001:10001 "$KIND_SHARED_DIR" 2>/dev/null || chmod 0777 "$KIND_SHARED_DIR"
kubectl "${ctx[@]}" apply --server-side --field-manager=burst-demo \
  -f "$REPO_ROOT/k8s/storage/checkpoint-volume-kind.yaml"
kubectl "${ctx[@]}" apply --server-side --field-manager=burst-demo -f "$manifest"
echo "watching StreamJobs (Ctrl-C to stop; events: kubectl get events --field-selector involvedObject.kind=StreamJob)"
kubectl "${ctx[@]}" get streamjobs --all-namespaces --watch
