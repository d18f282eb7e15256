#!/usr/bin/env bash
# Apply the sample StreamJob with the burst source and watch the controller scale it.
#   hack/kind/burst.sh [manifest]      (default: k8s/samples/streamjob-burst.yaml; Ctrl-C stops)
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
need kubectl

manifest=${1:-$REPO_ROOT/k8s/samples/streamjob-burst.yaml}
ctx=(--context "kind-$KIND_CLUSTER")
# the checkpoint claim the sample mounts: kind's local-path storage offers ReadWriteOnce, and its
# volume's node affinity keeps the driver and every executor pod on the node that holds it
sed 's/ReadWriteMany/ReadWriteOnce/' "$REPO_ROOT/k8s/storage/checkpoint-claim.yaml" |
    kubectl "${ctx[@]}" apply --server-side --field-manager=burst-demo -f -
kubectl "${ctx[@]}" apply --server-side --field-manager=burst-demo -f "$manifest"
echo "watching StreamJobs (Ctrl-C to stop; events: kubectl get events --field-selector involvedObject.kind=StreamJob)"
kubectl "${ctx[@]}" get streamjobs --all-namespaces --watch
