#!/usr/bin/env bash
# Shared settings of the kind scripts. Override any of them in the environment.
# shellcheck disable=SC2034  # read by the scripts that source this file
KIND_CLUSTER=${KIND_CLUSTER:-stream-autoscaler}
IMAGE=${IMAGE:-stream-autoscaler:dev}
NAMESPACE=${NAMESPACE:-stream-autoscaler-system}
RELEASE=${RELEASE:-stream-autoscaler}
REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
KIND_DIR="$REPO_ROOT/hack/kind"
# The node image: kind's own unless set (`make kind-up` sets it to the one hack/kind/node-image.sh
# builds when kind's cannot be pulled).
KIND_NODE_IMAGE=${KIND_NODE_IMAGE:-}
# Workers besides the control plane; Spark's driver and executors run on them.
KIND_WORKERS=${KIND_WORKERS:-2}
# A host directory every worker mounts at $KIND_SHARED_PATH: the checkpoint volume all of them
# read and write (ReadWriteMany, as NFS or EFS would be), which outlives any node.
KIND_SHARED_DIR=${KIND_SHARED_DIR:-$REPO_ROOT/.kind/shared}
KIND_SHARED_PATH=/var/lib/stream-autoscaler/shared

need() { # fail early, with the tool's name, when a prerequisite is missing
  local tool
  for tool in "$@"; do
    if ! command -v "$tool" >/dev/null 2>&1; then
      echo "error: $tool not found on PATH (needed by $(basename "$0"))" >&2
      exit 1
    fi
  done
}

# The cached tools of `make tools` (kind, kubectl, helm) when they are not on PATH.
tools_bin=${SA_TOOLS_BIN:-${XDG_CACHE_HOME:-$HOME/.cache}/stream-autoscaler/bin}
if [[ -d "$tools_bin" ]]; then
  # shellcheck source=../tools/versions.env
  source "$REPO_ROOT/hack/tools/versions.env"
  mkdir -p "$REPO_ROOT/.kind/bin"
  for _t in "kind-$KIND_VERSION" "kubectl-$KUBERNETES_VERSION" "helm-$HELM_VERSION"; do
    [[ -x "$tools_bin/$_t" ]] && ln -sf "$tools_bin/$_t" "$REPO_ROOT/.kind/bin/${_t%-v*}"
  done
  PATH="$PATH:$REPO_ROOT/.kind/bin"
fi

# docker: the daemon DOCKER_HOST names, else the default one, else the one `make image` starts.
if [[ -z "${DOCKER_HOST:-}" && -S /run/stream-autoscaler-docker/docker.sock ]] &&
  ! timeout 10 docker info >/dev/null 2>&1; then
  export DOCKER_HOST=unix:///run/stream-autoscaler-docker/docker.sock
fi
