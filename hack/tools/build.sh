#!/usr/bin/env bash
# Build the test-bed tools from Go modules and cache them outside the work tree:
#   kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, the real node's kubelet and
#   kube-proxy, and kubeadm for the kind node image (one `go build`, so they share its compile)
#   (hack/tools/k8s); kind (hack/tools/kind)
#   etcd (hack/tools/etcd), helm (hack/tools/helm), kwok (hack/tools/kwok),
#   coredns (hack/tools/coredns), crictl (hack/tools/crictl), pause (hack/tools/pause: the real node's sandbox image)
# and resolves the Kafka jars from Maven Central (hack/tools/kafka/resolve.sh), the S3A jars and
# the moto S3 server (hack/tools/s3a/resolve.sh).
# Binaries land in $SA_TOOLS_BIN (default ~/.cache/stream-autoscaler/bin) as <tool>-<version>.
# A group is rebuilt only when its stamp changes: the stamp hashes the version, go.mod, go.sum,
# main.go, the ldflags and the Go version. A warm run only compares stamps.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=versions.env
source "$here/versions.env"

# The Kafka broker and Spark's Kafka connector: jars from Maven Central (Java + Maven, no Go).
"$here/kafka/resolve.sh"
# S3A for a checkpoint on s3a:// (hadoop-aws + AWS SDK jars) and moto, the local S3 server of the
# tests (its own virtualenv from PyPI). After Kafka's: that one installs Maven when missing.
"$here/s3a/resolve.sh"

# No Go (or too old a Go) is a failure in CI; elsewhere the k8s test tier then skips and says why.
need_go=1.26
have_go=$(go env GOVERSION 2>/dev/null | sed 's/^go//') || true
if [[ -z "$have_go" ]] || [[ "$(printf '%s\n' "$need_go" "$have_go" | sort -V | head -1)" != "$need_go" ]]; then
  echo "tools: Go >= $need_go is needed to build the test-bed tools (found: ${have_go:-none})" >&2
  case "${CI:-}" in 1 | true | TRUE | yes) exit 1 ;; esac
  echo "tools: skipping; the Kubernetes test tier will be skipped" >&2
  exit 0
fi

bin=${SA_TOOLS_BIN:-${XDG_CACHE_HOME:-$HOME/.cache}/stream-autoscaler/bin}
mkdir -p "$bin"

# Two cores are shared with Spark tests: never more than two compile jobs.
export GOMAXPROCS=${GOMAXPROCS:-2}
export GOFLAGS="-trimpath -mod=readonly"
export GOTOOLCHAIN=local
export CGO_ENABLED=0
jobs=${SA_TOOLS_JOBS:-2}

# One build at a time per machine (several work trees share the cache).
exec 9>"$bin/.build.lock"
flock 9

go_version=$(go env GOVERSION)

pinned() { # module dir, module path, version: fail if go.mod pins another version
  local dir=$1 mod=$2 want=$3 got
  got=$(awk -v m="$mod" '$1 == m && $2 ~ /^v/ {print $2; exit} $1 == "require" && $2 == m {print $3; exit}' "$here/$dir/go.mod")
  if [[ "$got" != "$want" ]]; then
    echo "hack/tools/$dir/go.mod pins $mod ${got:-<none>}, versions.env says $want" >&2
    exit 1
  fi
}

stamp_of() { # group dir, ldflags
  { echo "$go_version $2"; cat "$here/$1"/go.mod "$here/$1"/go.sum; cat "$here/$1"/*.go 2>/dev/null || true; } | sha256sum | cut -c1-16
}

# build <group dir> <version> <ldflags> <tool>=<package>...
build() {
  local dir=$1 version=$2 ldflags=$3; shift 3
  local stamp_file="$bin/.$dir-$version.stamp" stamp missing=0 spec tool pkgs=() tools=()
  stamp=$(stamp_of "$dir" "$ldflags")
  for spec in "$@"; do
    tool=${spec%%=*}; tools+=("$tool"); pkgs+=("${spec#*=}")
    [[ -x "$bin/$tool-$version" ]] || missing=1
  done
  if [[ $missing == 0 && -f "$stamp_file" && "$(cat "$stamp_file")" == "$stamp" ]]; then
    echo "tools: ${tools[*]} $version up to date"
    return
  fi
  echo "tools: building ${tools[*]} $version (go $go_version, -p $jobs) ..."
  local start=$SECONDS out name
  out=$(mktemp -d "$bin/.build-$dir.XXXXXX")
  # One `go build` for the whole group, so the packages the binaries share compile once.
  # A cold k8s group takes minutes: say every 30 s that it is still going, rather than nothing.
  (cd "$here/$dir" && go build -p "$jobs" -ldflags "-s -w $ldflags" -o "$out/" "${pkgs[@]}") &
  local pid=$! next=$((SECONDS + 30))
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1
    if ((SECONDS >= next)); then
      echo "tools: still building ${tools[*]} ($((SECONDS - start)) s so far)"
      next=$((next + 30))
    fi
  done
  wait "$pid"
  for spec in "$@"; do
    tool=${spec%%=*}
    name=$(basename "${spec#*=}"); [[ $name == . ]] && name=$dir
    # An identical binary keeps its mtime, so running test beds do not restart for nothing
    # (another work tree with another go.mod for the same version rebuilds the group).
    if cmp -s "$out/$name" "$bin/$tool-$version"; then
      rm -f "$out/$name"
    else
      mv -f "$out/$name" "$bin/$tool-$version"
    fi
  done
  rmdir "$out"
  echo "$stamp" >"$stamp_file"
  echo "tools: built ${tools[*]} $version in $((SECONDS - start)) s"
}

total=$SECONDS

pinned k8s k8s.io/kubernetes "$KUBERNETES_VERSION"
k8s_minor=${KUBERNETES_VERSION#v}; k8s_minor=${k8s_minor#*.}; k8s_minor=${k8s_minor%%.*}
# What hack/lib/version.sh sets: without it /version says v0.0.0-master. The module proxy has no
# commit hash, so gitCommit stays empty; buildDate is the release's time (reproducible).
k8s_date=$(cd "$here/k8s" && go list -m -f '{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}' k8s.io/kubernetes)
k8s_ldflags=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  k8s_ldflags+=" -X $pkg.gitVersion=$KUBERNETES_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$k8s_minor"
  k8s_ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$k8s_date -X $pkg.gitCommit="
done
build k8s "$KUBERNETES_VERSION" "$k8s_ldflags" \
  kube-apiserver=k8s.io/kubernetes/cmd/kube-apiserver \
  kube-controller-manager=k8s.io/kubernetes/cmd/kube-controller-manager \
  kube-scheduler=k8s.io/kubernetes/cmd/kube-scheduler \
  kubectl=k8s.io/kubernetes/cmd/kubectl \
  kubelet=k8s.io/kubernetes/cmd/kubelet \
  kube-proxy=k8s.io/kubernetes/cmd/kube-proxy \
  kubeadm=k8s.io/kubernetes/cmd/kubeadm

pinned etcd go.etcd.io/etcd/server/v3 "$ETCD_VERSION"
build etcd "$ETCD_VERSION" "" etcd=.

pinned helm helm.sh/helm/v3 "$HELM_VERSION"
helm_ldflags="-X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
# Without these, `helm template` and `helm lint` assume Kubernetes v1.20 and reject charts that
# declare a newer kubeVersion. Helm's Makefile derives them from its client-go (v0.X -> 1.X).
helm_kube_minor=$(awk '$1 == "k8s.io/client-go" {split($2, v, "."); print v[2]; exit}' "$here/helm/go.mod")
for pkg in helm.sh/helm/v3/pkg/chartutil helm.sh/helm/v3/pkg/lint/rules; do
  helm_ldflags+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$helm_kube_minor"
done
build helm "$HELM_VERSION" "$helm_ldflags" helm=helm.sh/helm/v3/cmd/helm

pinned kwok sigs.k8s.io/kwok "$KWOK_VERSION"
build kwok "$KWOK_VERSION" "-X sigs.k8s.io/kwok/pkg/consts.Version=${KWOK_VERSION#v}" kwok=sigs.k8s.io/kwok/cmd/kwok

# CoreDNS for the real node: the cluster domain only (hack/tools/coredns/main.go picks the plugins).
pinned coredns github.com/coredns/coredns "$COREDNS_VERSION"
build coredns "$COREDNS_VERSION" "-X github.com/coredns/coredns/coremain.GitCommit=" coredns=.

# crictl: what the real node's down path uses to stop and remove pods through CRI (so CNI tears
# their network down), and the tool to debug the node with.
pinned crictl sigs.k8s.io/cri-tools "$CRICTL_VERSION"
build crictl "$CRICTL_VERSION" "-X sigs.k8s.io/cri-tools/pkg/version.Version=$CRICTL_VERSION" \
  crictl=sigs.k8s.io/cri-tools/cmd/crictl

# kind: `make kind-burst` and the kind tier create their clusters with it (hack/kind/).
pinned kind sigs.k8s.io/kind "$KIND_VERSION"
build kind "$KIND_VERSION" "" kind=sigs.k8s.io/kind

# The real node's pod sandbox: a static pause binary (hack/tools/pause); testbed_node.py wraps it
# in an image tagged as containerd's sandbox_image, since no registry can be pulled from here.
build pause "$PAUSE_VERSION" "" pause=.

# kwok needs its Stage objects (node initialize + lease heartbeat, pod ready/complete/delete) as
# config files since v0.7: take them from the pinned module rather than keeping a copy here.
stages="$bin/kwok-stages-$KWOK_VERSION.yaml"
if [[ ! -s "$stages" ]]; then
  kwok_dir=$(cd "$here/kwok" && go mod download -json sigs.k8s.io/kwok | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  for f in node/fast/node-initialize node/heartbeat-with-lease/node-heartbeat-with-lease \
    pod/fast/pod-ready pod/fast/pod-complete pod/fast/pod-delete; do
    echo "---"
    cat "$kwok_dir/kustomize/stage/$f.yaml"
  done >"$stages.tmp"
  mv "$stages.tmp" "$stages"
  echo "tools: wrote $stages"
fi

echo "tools: done in $((SECONDS - total)) s; binaries in $bin"
