#!/usr/bin/env bash
# Create the kind cluster (reused when it exists): one control plane and $KIND_WORKERS workers,
# each worker mounting $KIND_SHARED_DIR (the checkpoint volume). Needs kind and docker.
# The config is hack/kind/kind-config.yaml plus the nodes (written to .kind/<cluster>-config.yaml).
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
need kind kubectl docker

local_image=0
[[ $KIND_NODE_IMAGE == stream-autoscaler/kind-node:* ]] && local_image=1

if ((local_image)) && ! docker run --rm --privileged --entrypoint true "$KIND_NODE_IMAGE" >/dev/null 2>&1; then
  echo "error: docker cannot run a privileged container of $KIND_NODE_IMAGE (kind's nodes are)." >&2
  echo "On a host whose capability bounding set is short, the dockerd of hack/image/build.sh runs" >&2
  echo "hack/image/runc-bounded; a dockerd started before it does not: hack/image/build.sh down" >&2
  exit 1
fi
if kind get clusters 2>/dev/null | grep -qx "$KIND_CLUSTER" &&
  ! timeout 60 kubectl --context "kind-$KIND_CLUSTER" get nodes >/dev/null 2>&1; then
  # its containers outlived their dockerd (a reboot, a stopped session): start afresh
  echo "kind cluster $KIND_CLUSTER exists but does not answer: deleting it"
  kind delete cluster --name "$KIND_CLUSTER"
fi
if kind get clusters 2>/dev/null | grep -qx "$KIND_CLUSTER"; then
  echo "kind cluster $KIND_CLUSTER exists"
else
  mkdir -p "$KIND_SHARED_DIR" "$REPO_ROOT/.kind"
  config="$REPO_ROOT/.kind/$KIND_CLUSTER-config.yaml"
  {
    cat "$KIND_DIR/kind-config.yaml"
    if ((local_image)); then
      # Our node image's etcd and CoreDNS are our builds, tagged with their own versions; it has
      # no kindnetd, so no default CNI (cni.sh routes the pod subnets instead).
      # shellcheck source=../tools/versions.env
      source "$REPO_ROOT/hack/tools/versions.env"
      printf '  - |\n    kind: ClusterConfiguration\n    etcd:\n      local:\n        imageTag: %s\n' "$ETCD_VERSION"
      printf '    dns:\n      imageTag: %s\n' "$COREDNS_VERSION"
      printf 'networking:\n  disableDefaultCNI: true\n'
    fi
    printf 'nodes:\n  - role: control-plane\n'
    for _ in $(seq "$KIND_WORKERS"); do
      printf '  - role: worker\n    extraMounts:\n      - hostPath: %s\n        containerPath: %s\n' \
        "$KIND_SHARED_DIR" "$KIND_SHARED_PATH"
    done
  } >"$config"
  image=()
  [[ -n "$KIND_NODE_IMAGE" ]] && image=(--image "$KIND_NODE_IMAGE")
  echo "creating kind cluster $KIND_CLUSTER (1 control plane, $KIND_WORKERS workers; config $config)"
  if ((local_image)); then
    # No CNI until cni.sh: nodes are NotReady until then, so kind must not wait for them.
    kind create cluster --name "$KIND_CLUSTER" --config "$config" "${image[@]}"
    "$KIND_DIR/cni.sh"
  else
    kind create cluster --name "$KIND_CLUSTER" --config "$config" "${image[@]}" --wait 180s
  fi
fi
kubectl --context "kind-$KIND_CLUSTER" wait --for=condition=Ready node --all --timeout=180s
# CoreDNS's two replicas are placed as nodes turn Ready, so both can land on one worker, and
# losing that worker then leaves the cluster without DNS (the controller reaches runners by
# their Service names). Once every node is Ready, a restart spreads them (kubeadm's Deployment
# prefers one replica per node and tolerates the control plane).
if [[ $(kubectl --context "kind-$KIND_CLUSTER" -n kube-system get pods -l k8s-app=kube-dns \
  -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' | sort -u | wc -l) -lt 2 ]]; then
  kubectl --context "kind-$KIND_CLUSTER" -n kube-system rollout restart deployment coredns
  kubectl --context "kind-$KIND_CLUSTER" -n kube-system rollout status deployment coredns --timeout=120s
fi
kubectl --context "kind-$KIND_CLUSTER" get nodes -o wide
