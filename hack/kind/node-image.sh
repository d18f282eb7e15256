#!/usr/bin/env bash
# A kind node image assembled from parts built on this machine, for hosts that reach no container
# registry (kind's own kindest/node is pulled from Docker Hub). Prints the image's tag on stdout.
#   hack/kind/node-image.sh          build (cached) and print the tag
#   hack/kind/node-image.sh auto     kind's default image when it is present or can be pulled
#                                    (or when not root: nothing, kind then uses its own), else
#                                    ours (what `make kind-up` uses)
# What goes in, and from where:
#   - a Debian bookworm root filesystem (debootstrap, then apt in a chroot): systemd, Debian's
#     containerd 1.6, runc, the CNI plugins, iptables, conntrack, iproute2 and what kubeadm checks;
#   - kind's own node files (entrypoint, systemd units, kubelet drop-ins) from its Go module, the
#     version hack/tools/versions.env pins, so `kind create cluster` finds what it expects;
#   - kubeadm, kubelet, kubectl, crictl, and the control plane, kube-proxy, etcd, CoreDNS and pause
#     images made from the binaries `make tools` builds (hack/tools/build.sh), preloaded into the
#     node's containerd so nothing is pulled;
#   - containerd's config for 1.6 with `restrict_oom_score_adj` (this host refuses a negative
#     oom_score_adj, even to root) and the systemd cgroup driver kind's kubeadm config asks for.
# No CNI and no storage provisioner image are preloaded: hack/kind/cni.sh routes pod subnets
# between nodes with the plugins' ptp + host-local, and the checkpoint volume is a host directory
# every node mounts (hack/kind/kind-config-local.yaml).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
# shellcheck source=../tools/versions.env
source "$repo/hack/tools/versions.env"
cache=${XDG_CACHE_HOME:-$HOME/.cache}/stream-autoscaler
bin=${SA_TOOLS_BIN:-$cache/bin}
docker=/usr/bin/docker
t0=$SECONDS
say() { printf 'kind-node: [%3ds] %s\n' "$((SECONDS - t0))" "$*" >&2; }

if [[ ${1:-} == auto && $(id -u) != 0 ]]; then
  # a laptop: kind's own image (kind pulls it); ours needs root (debootstrap, our dockerd)
  say "not root: kind's own node image"
  exit 0
fi
if [[ ${1:-} == auto ]]; then
  default=$(sed -n 's/^const Image = "\(.*\)"$/\1/p' \
    "$(cd "$repo/hack/tools/kind" && go mod download -json sigs.k8s.io/kind | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')/pkg/apis/config/defaults/image.go")
  eval "$("$repo/hack/image/build.sh" env)"
  export DOCKER_HOST
  if "$docker" image inspect "$default" >/dev/null 2>&1 || timeout 60 "$docker" pull -q "$default" >/dev/null 2>&1; then
    say "kind's own node image: $default"
    echo "$default"
    exit 0
  fi
  say "$default cannot be pulled here: building a node image from local parts"
fi

[[ $(id -u) == 0 ]] || { echo "kind-node: needs root (debootstrap, dockerd)" >&2; exit 1; }
eval "$("$repo/hack/image/build.sh" env)"
export DOCKER_HOST

kind_dir=$(cd "$repo/hack/tools/kind" && go mod download -json "sigs.k8s.io/kind@$KIND_VERSION" |
  sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
files="$kind_dir/images/base/files"
[[ -d "$files" ]] || { echo "kind-node: kind's node files not found in $kind_dir" >&2; exit 1; }

# --- the root filesystem (cached tarball: debootstrap + apt take a minute or two) ----------------

packages="systemd dbus containerd runc containernetworking-plugins conntrack iptables nftables iproute2
ethtool socat util-linux mount kmod libseccomp2 ca-certificates procps curl jq"
mirror=$(awk '/^URIs:/ && $2 !~ /security/ {print $2; exit}' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
[[ -n "$mirror" ]] || mirror=$(awk '/^deb / && $0 !~ /security/ {print $2; exit}' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null || true)
mirror=${mirror:-http://deb.debian.org/debian}
rootfs_key=$(printf '%s\n' v1 bookworm "$mirror" "$packages" | sha256sum | cut -c1-12)
rootfs="$cache/images/kind-rootfs-$rootfs_key.tar"
mkdir -p "$cache/images"
if [[ ! -s "$rootfs" ]]; then
  command -v debootstrap >/dev/null || { apt-get update -qq && apt-get install -y -qq debootstrap >/dev/null; }
  dir=$(mktemp -d "$cache/images/.kind-rootfs.XXXXXX")
  log="$cache/images/kind-rootfs.log"
  say "debootstrap --variant=minbase bookworm, then apt-get install in it (log $log)"
  {
    debootstrap --variant=minbase bookworm "$dir" "$mirror"
    cp /etc/resolv.conf "$dir/etc/resolv.conf"
    mount -t proc proc "$dir/proc"
    chroot "$dir" /bin/sh -c "apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
      apt-get install -y -qq --no-install-recommends ${packages//$'\n'/ }" || { umount "$dir/proc"; exit 1; }
    umount "$dir/proc"
    : >"$dir/etc/resolv.conf"
  } >"$log" 2>&1 || { tail -20 "$log" >&2; echo "kind-node: rootfs kept for inspection: $dir" >&2; exit 1; }
  rm -rf "$dir"/var/cache/apt/archives/*.deb "$dir"/var/lib/apt/lists/* "$dir"/usr/share/doc/* \
    "$dir"/usr/share/man/* "$dir"/usr/share/locale/*
  tar --numeric-owner -C "$dir" -cf "$rootfs.tmp" .
  mv "$rootfs.tmp" "$rootfs"
  rm -rf "$dir"
  say "rootfs cached: $rootfs ($(du -m "$rootfs" | cut -f1) MB)"
fi

tool() { # name version: the cached binary, or a clear error naming `make tools`
  local f="$bin/$1-$2"
  [[ -x "$f" ]] || { echo "kind-node: $f missing: run \`make tools\`" >&2; exit 1; }
  echo "$f"
}
k8s_bins=(kubeadm kubelet kubectl kube-apiserver kube-controller-manager kube-scheduler kube-proxy)
declare -A path
for b in "${k8s_bins[@]}"; do path[$b]=$(tool "$b" "$KUBERNETES_VERSION"); done
path[etcd]=$(tool etcd "$ETCD_VERSION")
path[coredns]=$(tool coredns "$COREDNS_VERSION")
path[pause]=$(tool pause "$PAUSE_VERSION")
path[crictl]=$(tool crictl "$CRICTL_VERSION")

# --- the node image ------------------------------------------------------------------------------

key=$({
  echo "$rootfs_key $KIND_VERSION"
  sha256sum <"$0" # the content, not the path: every clone shares the image
  sha256sum "${path[@]}"
  find "$files" -type f -print0 | sort -z | xargs -0 sha256sum
} | sha256sum | cut -c1-12)
tag="stream-autoscaler/kind-node:$KUBERNETES_VERSION-$key"
if "$docker" image inspect "$tag" >/dev/null 2>&1; then
  say "$tag up to date"
  echo "$tag"
  exit 0
fi

work=$(mktemp -d "$cache/images/.kind-node.XXXXXX")
stage="sa-kind-node-stage-$key"
cleanup() { "$docker" rm -f "$stage" >/dev/null 2>&1 || true; rm -rf "$work"; }
trap cleanup EXIT

say "assembling the node root filesystem"
root="$work/root"
mkdir -p "$root"
tar -C "$root" -xf "$rootfs"
# kind's node files, laid out as its base image's Dockerfile lays them out
install -m 0755 "$files"/usr/local/bin/* "$root/usr/local/bin/"
mkdir -p "$root/kind/bin" "$root/kind/manifests" "$root/etc/systemd/system/kubelet.service.d" \
  "$root/etc/kubernetes/manifests" "$root/etc/containerd" "$root/etc/cni/net.d" "$root/opt/cni"
install -m 0755 "$files"/kind/bin/* "$root/kind/bin/"
install -m 0644 "$files"/etc/crictl.yaml "$root/etc/"
install -m 0644 "$files"/etc/default/* "$root/etc/default/"
install -m 0644 "$files"/etc/sysctl.d/* "$root/etc/sysctl.d/"
install -m 0644 "$files"/etc/systemd/system/*.service "$files"/etc/systemd/system/*.slice "$root/etc/systemd/system/"
install -m 0644 "$files"/etc/systemd/system/kubelet.service.d/* "$root/etc/systemd/system/kubelet.service.d/"
# Debian's containerd is /usr/bin/containerd; kind's unit starts /usr/local/bin/containerd.
ln -sf /usr/bin/containerd "$root/usr/local/bin/containerd"
ln -sfn /usr/lib/cni "$root/opt/cni/bin"
for b in kubeadm kubelet kubectl; do install -m 0755 "${path[$b]}" "$root/usr/bin/$b"; done
install -m 0755 "${path[crictl]}" "$root/usr/local/bin/crictl"
cat >"$root/etc/containerd/config.toml" <<'EOF'
# containerd 1.6 (Debian bookworm) for a kind node; kind's own config is containerd 2's.
version = 2

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:PAUSE"
  # This host refuses a negative oom_score_adj even to root: without this every sandbox fails.
  restrict_oom_score_adj = true
  enable_selinux = false

[plugins."io.containerd.grpc.v1.cri".containerd]
  snapshotter = "overlayfs"
  default_runtime_name = "runc"
  discard_unpacked_layers = true

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
  SystemdCgroup = true

[plugins."io.containerd.grpc.v1.cri".cni]
  bin_dir = "/usr/lib/cni"
  conf_dir = "/etc/cni/net.d"
EOF
sed -i "s/PAUSE/$PAUSE_VERSION/" "$root/etc/containerd/config.toml"
echo "$KUBERNETES_VERSION" >"$root/kind/version"
# The checkpoint volume is a host directory every node mounts (kind-config-local.yaml): a storage
# class without a provisioner, so nothing waits on an image that cannot be pulled.
cat >"$root/kind/manifests/default-storage.yaml" <<'EOF'
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: standard
  annotations:
    storageclass.kubernetes.io/is-default-class: "true"
provisioner: kubernetes.io/no-provisioner
volumeBindingMode: WaitForFirstConsumer
EOF
# As kind's base Dockerfile does: systemd as init, only the units a node needs.
chroot "$root" /bin/sh -euc '
  find /lib/systemd/system/sysinit.target.wants/ -name "systemd-tmpfiles-setup.service" -delete
  rm -f /lib/systemd/system/multi-user.target.wants/* /etc/systemd/system/*.wants/* \
    /lib/systemd/system/local-fs.target.wants/* /lib/systemd/system/sockets.target.wants/*udev* \
    /lib/systemd/system/sockets.target.wants/*initctl* /lib/systemd/system/basic.target.wants/*
  echo "ReadKMsg=no" >>/etc/systemd/journald.conf
  ln -sf /usr/lib/systemd/systemd /sbin/init
  systemctl enable kubelet.service containerd.service undo-mount-hacks.service >/dev/null 2>&1
  systemctl mask systemd-binfmt.service >/dev/null 2>&1
'
: >"$root/etc/machine-id"

# --- the images kubeadm runs, made from our binaries ---------------------------------------------

image_from() { # tag, entrypoint binary path in the image, files to put in: src:dest...
  local tag=$1 entry=$2 d
  shift 2
  d=$(mktemp -d "$work/img.XXXXXX")
  local spec
  for spec in "$@"; do
    mkdir -p "$d/$(dirname "${spec#*:}")"
    install -m 0755 "${spec%%:*}" "$d/${spec#*:}"
  done
  tar --numeric-owner -C "$d" -c . | "$docker" import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change "ENTRYPOINT [\"$entry\"]" - "$tag" >/dev/null
  rm -rf "$d"
}
images=()
for b in kube-apiserver kube-controller-manager kube-scheduler; do
  image_from "registry.k8s.io/$b:$KUBERNETES_VERSION" "/usr/local/bin/$b" "${path[$b]}:usr/local/bin/$b"
  images+=("registry.k8s.io/$b:$KUBERNETES_VERSION")
done
image_from "registry.k8s.io/etcd:$ETCD_VERSION" /usr/local/bin/etcd "${path[etcd]}:usr/local/bin/etcd"
image_from "registry.k8s.io/coredns/coredns:$COREDNS_VERSION" /coredns "${path[coredns]}:coredns"
image_from "registry.k8s.io/pause:$PAUSE_VERSION" /pause "${path[pause]}:pause"
images+=("registry.k8s.io/etcd:$ETCD_VERSION" "registry.k8s.io/coredns/coredns:$COREDNS_VERSION"
  "registry.k8s.io/pause:$PAUSE_VERSION")
# kube-proxy runs iptables-restore and conntrack: its image is the node's root filesystem.
install -m 0755 "${path[kube-proxy]}" "$root/usr/local/bin/kube-proxy"

say "importing the node image"
tar --numeric-owner -C "$root" -c . | "$docker" import - "$stage" >/dev/null
"$docker" tag "$stage" "registry.k8s.io/kube-proxy:$KUBERNETES_VERSION"
images+=("registry.k8s.io/kube-proxy:$KUBERNETES_VERSION")

# Preload: containerd in a throwaway container of the node image, `ctr import` each image (not
# unpacked: overlay on overlay fails; the node unpacks on first use), then commit it.
say "preloading ${#images[@]} images into the node's containerd"
"$docker" run -d --name "$stage" --privileged --entrypoint sleep "$stage" infinity >/dev/null
# shellcheck disable=SC2016 # expanded by the container's shell
"$docker" exec "$stage" sh -c 'containerd >/var/log/containerd-preload.log 2>&1 &
  for _ in $(seq 100); do ctr version >/dev/null 2>&1 && exit 0; sleep 0.2; done; exit 1'
for img in "${images[@]}"; do
  "$docker" save "$img" | "$docker" exec -i "$stage" ctr -n k8s.io images import --no-unpack --digests - >/dev/null
done
# shellcheck disable=SC2016 # expanded by the container's shell
"$docker" exec "$stage" sh -c 'pkill containerd; for _ in $(seq 50); do pgrep containerd >/dev/null || exit 0; sleep 0.2; done
  rm -f /var/log/containerd-preload.log'
"$docker" stop -t 1 "$stage" >/dev/null
"$docker" commit "$stage" "$stage-preloaded" >/dev/null
"$docker" rm -f "$stage" >/dev/null
# What kind's base image declares (`docker commit --change` cannot set STOPSIGNAL): systemd is
# PID 1 and stops cleanly on SIGRTMIN+3.
printf '%s\n' "FROM $stage-preloaded" 'ENV container=docker' 'STOPSIGNAL SIGRTMIN+3' \
  'ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]' 'CMD []' |
  DOCKER_BUILDKIT=0 "$docker" build -q -t "$tag" - >/dev/null
"$docker" rmi "$stage-preloaded" >/dev/null
"$docker" rmi "$stage" "${images[@]}" >/dev/null 2>&1 || true
say "built $tag ($(($("$docker" image inspect -f '{{.Size}}' "$tag") / 1000000)) MB)"
# Node images of other inputs (1.7 GB each) and stages of interrupted builds are dead weight.
"$docker" images --format '{{.Repository}}:{{.Tag}}' |
  grep -E '^(stream-autoscaler/kind-node:|sa-kind-node-stage-)' | grep -vx "$tag" |
  xargs -r "$docker" rmi >/dev/null 2>&1 || true
echo "$tag"
