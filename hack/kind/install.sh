#!/usr/bin/env bash
# Install (or upgrade) the chart with the kind values: CRDs, controller, RBAC, bundled policies.
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
need helm kubectl

helm upgrade --install "$RELEASE" "$REPO_ROOT/helm/stream-autoscaler" \
  --kube-context "kind-$KIND_CLUSTER" \
  --namespace "$NAMESPACE" --create-namespace \
  --values "$KIND_DIR/values-kind.yaml" \
  --wait --timeout 5m "$@"
kubectl --context "kind-$KIND_CLUSTER" get scalingpolicies --namespace default
