#!/usr/bin/env bash
# `make image`: build stream-autoscaler:dev without any registry, cached.
#   1. Debian's docker.io (dockerd 20.10 + BuildKit, containerd, runc) and debootstrap, if missing.
#   2. A dockerd of our own when none answers: no default bridge, no NAT (--bridge=none
#      --iptables=false --ip-forward=false), data under ~/.cache/stream-autoscaler/docker, pid
#      file in /run/stream-autoscaler-docker; `hack/image/build.sh down` stops it. Where the
#      host's capability bounding set is short, its default runtime is hack/image/runc-bounded.
#   3. The base image: `debootstrap --variant=minbase bookworm` from the mirror apt already uses,
#      then python3.11 (+venv), openjdk-17-jre-headless, tini, procps by apt in it; cached as a tarball in
#      ~/.cache/stream-autoscaler/images/ keyed by a hash of its inputs; `docker import`ed.
#   4. stream-autoscaler:dev from the project's Dockerfile on that base (--network host; the host's
#      CA bundle, which holds the TLS proxy's CA, as the BuildKit secret `ca-bundle`). Skipped when
#      the image's label says its inputs (base, Dockerfile, sources) did not change.
#   5. If the test bed's node runs, the image goes into its containerd (k8s.io namespace), once
#      per image id.
# Usage: hack/image/build.sh [build|import|env|down]     (IMAGE=stream-autoscaler:dev by default)
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cache=${XDG_CACHE_HOME:-$HOME/.cache}/stream-autoscaler
image=${IMAGE:-stream-autoscaler:dev}
run_dir=/run/stream-autoscaler-docker
docker=/usr/bin/docker # Debian's 20.10 client: its classic `build` speaks BuildKit without buildx
t0=$SECONDS

exec 3>&1 # progress goes here even while a step's output goes to its log
say() { printf 'image: [%3ds] %s\n' "$((SECONDS - t0))" "$*" >&3; }

# Print what a long step is doing every 15 s instead of staying silent.
with_progress() { # label, command...
  local label=$1 start=$SECONDS next=$((SECONDS + 15)) pid rc=0
  shift
  "$@" &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1
    if ((SECONDS >= next)) && kill -0 "$pid" 2>/dev/null; then
      say "$label: still running ($((SECONDS - start)) s so far)"
      next=$((next + 15))
    fi
  done
  wait "$pid" || rc=$?
  return "$rc"
}

need_root() {
  [[ $(id -u) == 0 ]] || { echo "image: needs root (dockerd, debootstrap)" >&2; exit 1; }
}

install_packages() {
  local missing=()
  [[ -x /usr/sbin/dockerd && -x $docker ]] || missing+=(docker.io)
  command -v debootstrap >/dev/null || missing+=(debootstrap)
  ((${#missing[@]})) || return 0
  say "installing Debian packages: ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# --- dockerd -------------------------------------------------------------------------------------

docker_ok() { DOCKER_HOST=$1 timeout 10 "$docker" info >/dev/null 2>&1; }

ours_pid() { # the pid of our dockerd, if it runs
  local pid
  pid=$(cat "$run_dir/dockerd.pid" 2>/dev/null) || return 1
  [[ -n "$pid" ]] && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q "dockerd .*--exec-root=$run_dir" &&
    echo "$pid"
}

# A host whose capability bounding set lacks some capability (this one lacks CAP_SYS_RESOURCE)
# cannot run `docker run --privileged` (kind's nodes) with plain runc: the default runtime is then
# hack/image/runc-bounded, which grants privileged containers our bounding set, as podman does.
bounding_set_short() {
  local bnd last
  bnd=$((16#$(awk '/^CapBnd:/ {print $2}' /proc/self/status)))
  last=$(cat /proc/sys/kernel/cap_last_cap)
  ((bnd != (1 << (last + 1)) - 1))
}

daemon_config() {
  if bounding_set_short; then
    install -m 0755 "$repo/hack/image/runc-bounded" "$cache/runc-bounded"
    printf '{"runtimes": {"bounded": {"path": "%s"}}, "default-runtime": "bounded"}\n' \
      "$cache/runc-bounded" >"$cache/dockerd.json"
  else
    echo '{}' >"$cache/dockerd.json"
  fi
}

ensure_dockerd() {
  if [[ -n "${DOCKER_HOST:-}" ]] && docker_ok "$DOCKER_HOST"; then return; fi
  if docker_ok "unix://$run_dir/docker.sock"; then
    export DOCKER_HOST="unix://$run_dir/docker.sock"
    return
  fi
  if docker_ok unix:///var/run/docker.sock; then
    export DOCKER_HOST=unix:///var/run/docker.sock
    say "using the running dockerd at /var/run/docker.sock"
    return
  fi
  mkdir -p "$run_dir" "$cache/docker"
  daemon_config
  say "starting dockerd (no bridge, no NAT; data in $cache/docker; log $cache/docker.log)"
  setsid /usr/sbin/dockerd --bridge=none --iptables=false --ip-forward=false --ip-masq=false \
    --config-file="$cache/dockerd.json" \
    --data-root="$cache/docker" --exec-root="$run_dir" --pidfile="$run_dir/dockerd.pid" \
    --host="unix://$run_dir/docker.sock" --storage-driver=overlay2 \
    >>"$cache/docker.log" 2>&1 </dev/null 3>&- 8>&- &
  export DOCKER_HOST="unix://$run_dir/docker.sock"
  local _
  for _ in $(seq 60); do
    docker_ok "$DOCKER_HOST" && { say "dockerd up (pid $(cat "$run_dir/dockerd.pid"))"; return; }
    sleep 0.5
  done
  tail -20 "$cache/docker.log" >&2
  echo "image: dockerd did not start" >&2
  exit 1
}

stop_dockerd() {
  local pid _
  if ! pid=$(ours_pid); then
    echo "image: our dockerd is not running"
    return
  fi
  kill -TERM "$pid"
  for _ in $(seq 60); do
    [[ -d /proc/$pid ]] || { echo "image: stopped dockerd (pid $pid)"; return; }
    sleep 0.5
  done
  kill -KILL "$pid"
  echo "image: killed dockerd (pid $pid)"
}

# --- the debootstrap base --------------------------------------------------------------------------

debian_mirror() { # the first Debian mirror apt uses (deb822 or one-line sources)
  local m
  m=$(awk '/^URIs:/ && $2 !~ /security/ {print $2; exit}' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
  [[ -n "$m" ]] || m=$(awk '/^deb / && $0 !~ /security/ {print $2; exit}' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null || true)
  echo "${m:-http://deb.debian.org/debian}"
}

# debootstrap's own --include cannot order the configuration of these (python3.11-venv and
# ca-certificates-java fail in its second stage), so minbase first, then apt inside the chroot.
base_packages="python3.11 python3.11-venv openjdk-17-jre-headless tini procps passwd ca-certificates"

chroot_apt() { # rootfs: apt-get install the base packages inside it, /proc and DNS lent for it
  local dir=$1 rc=0
  cp /etc/resolv.conf "$dir/etc/resolv.conf"
  mount -t proc proc "$dir/proc"
  # shellcheck disable=SC2086 # a word list on purpose
  chroot "$dir" /bin/sh -c "apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -qq --no-install-recommends $base_packages" || rc=$?
  umount "$dir/proc"
  : >"$dir/etc/resolv.conf"
  return "$rc"
}

ensure_base() {
  local mirror key tarball tag dir
  mirror=$(debian_mirror)
  key=$(printf '%s\n' "v3" bookworm minbase "$mirror" "$base_packages" "$(dpkg-query -W -f '${Version}' debootstrap)" |
    sha256sum | cut -c1-12)
  tarball="$cache/images/base-bookworm-$key.tar"
  tag="stream-autoscaler-base:bookworm-$key"
  if [[ ! -s "$tarball" ]]; then
    mkdir -p "$cache/images"
    dir=$(mktemp -d "$cache/images/.rootfs.XXXXXX")
    say "debootstrap --variant=minbase bookworm from $mirror, then apt-get install $base_packages"
    local start=$SECONDS log="$cache/images/debootstrap.log"
    { with_progress debootstrap debootstrap --variant=minbase bookworm "$dir" "$mirror" &&
      with_progress "apt-get in the rootfs" chroot_apt "$dir"; } >"$log" 2>&1 ||
      { tail -20 "$log" >&2; echo "image: rootfs kept for inspection: $dir" >&2; exit 1; }
    # What the Dockerfile expects of python:3.11-slim: `python` and `python3` on PATH.
    ln -sf /usr/bin/python3.11 "$dir/usr/local/bin/python"
    ln -sf /usr/bin/python3.11 "$dir/usr/local/bin/python3"
    # Docs, manuals and translations are not needed in a runtime image (~40 MB).
    rm -rf "$dir"/var/cache/apt/archives/*.deb "$dir"/var/lib/apt/lists/* "$dir"/var/log/* "$dir"/tmp/* \
      "$dir"/usr/share/doc/* "$dir"/usr/share/man/* "$dir"/usr/share/info/* "$dir"/usr/share/locale/*
    tar --numeric-owner -C "$dir" -cf "$tarball.tmp" .
    mv "$tarball.tmp" "$tarball"
    rm -rf "$dir"
    say "base rootfs cached: $tarball ($(du -m "$tarball" | cut -f1) MB, debootstrap + apt + tar $((SECONDS - start)) s)"
    # Older bases (other inputs) are dead weight: drop their tarballs and images.
    find "$cache/images" -maxdepth 1 -name 'base-bookworm-*.tar' ! -name "${tarball##*/}" -delete
    "$docker" images --format '{{.Repository}}:{{.Tag}}' stream-autoscaler-base |
      grep -vx "$tag" | xargs -r "$docker" rmi >/dev/null 2>&1 || true
  fi
  if ! "$docker" image inspect "$tag" >/dev/null 2>&1; then
    say "docker import $tag"
    "$docker" import \
      --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
      --change 'ENV LANG=C.UTF-8' --change 'CMD ["/bin/bash"]' \
      "$tarball" "$tag" >/dev/null
  fi
  base_tag=$tag
}

# --- stream-autoscaler:dev -----------------------------------------------------------------------

inputs_hash() { # everything the Dockerfile reads, plus the base
  {
    echo "$base_tag $("$docker" image inspect -f '{{.Id}}' "$base_tag")"
    cd "$repo"
    find Dockerfile .dockerignore pyproject.toml README.md docker hack/jvm-archive/warmup.py app contracts controller operators policies traces \
      -type f ! -path '*/__pycache__/*' ! -name '*.pyc' -print0 | sort -z | xargs -0 sha256sum
  } | sha256sum | cut -c1-16
}

ca_bundle() { # what this machine trusts, the TLS proxy's CA included
  local f
  for f in /etc/ssl/certs/ca-certificates.crt /etc/pki/tls/certs/ca-bundle.crt; do
    [[ -s $f ]] && { echo "$f"; return; }
  done
}

ensure_app_image() {
  local want have start ca secret=()
  want=$(inputs_hash)
  have=$("$docker" image inspect -f '{{index .Config.Labels "org.stream-autoscaler.inputs"}}' "$image" 2>/dev/null || true)
  if [[ "$have" == "$want" ]]; then
    say "$image up to date (inputs $want)"
    return
  fi
  ca=$(ca_bundle)
  [[ -n "$ca" ]] && secret=(--secret "id=ca-bundle,src=$ca")
  say "docker build $image (base $base_tag, inputs $want; log $cache/images/build.log)"
  start=$SECONDS
  DOCKER_BUILDKIT=1 with_progress "docker build" "$docker" build --network host --progress plain \
    --build-arg "PYTHON_IMAGE=$base_tag" "${secret[@]}" \
    --label "org.stream-autoscaler.inputs=$want" -t "$image" "$repo" \
    >"$cache/images/build.log" 2>&1 || { tail -30 "$cache/images/build.log" >&2; exit 1; }
  say "built $image in $((SECONDS - start)) s ($(($("$docker" image inspect -f '{{.Size}}' "$image") / 1000000)) MB)"
}

# Images a rebuild replaced (~1.5 GB each, untagged) and BuildKit's cache beyond what the next
# build reuses are dead weight: left alone they filled the disk after ~10 rebuilds, and the test
# bed's kubelet tainted its node with disk-pressure. Cheap when there is nothing to drop.
prune() {
  local keep=${BUILD_CACHE_KEEP:-3GB} freed
  freed=$("$docker" image prune -f --filter "label=org.stream-autoscaler.inputs" | awk '/^Total reclaimed space/ {print $4}')
  [[ -n "$freed" && "$freed" != 0B ]] && say "removed superseded $image builds ($freed)"
  freed=$("$docker" builder prune -f --keep-storage "$keep" | awk '/^Total/ {print $NF}')
  [[ -n "$freed" && "$freed" != 0B ]] && say "trimmed the build cache to $keep ($freed)"
  return 0
}

# --- into the test bed node's containerd -----------------------------------------------------------

import_to_node() {
  local sock="${TESTBED_DIR:-$repo/.testbed}/node/containerd/containerd.sock" id stamp
  if [[ ! -S "$sock" ]] || ! timeout 10 ctr -a "$sock" version >/dev/null 2>&1; then
    say "the test bed's node is not running: nothing to import into (make testbed)"
    return
  fi
  id=$("$docker" image inspect -f '{{.Id}}' "$image")
  stamp="${sock%/*}/imported-${image//[:\/]/_}"
  if [[ "$(cat "$stamp" 2>/dev/null)" == "$id" ]] &&
    ctr -a "$sock" -n k8s.io images ls -q "name==docker.io/library/$image" | grep -q .; then
    say "$image ($id) already in the node's containerd"
    return
  fi
  say "importing $image into the node's containerd (ctr -n k8s.io images import)"
  local start=$SECONDS
  "$docker" save "$image" | with_progress "ctr import" timeout 600 ctr -a "$sock" -n k8s.io images import - >/dev/null
  echo "$id" >"$stamp"
  say "imported in $((SECONDS - start)) s"
}

cmd=${1:-build}
case "$cmd" in
  build)
    need_root
    install_packages
    mkdir -p "$cache/images"
    exec 8>"$cache/images/.lock" # one build at a time per machine
    flock 8
    ensure_dockerd
    ensure_base
    ensure_app_image
    prune
    import_to_node
    say "done: $image"
    ;;
  import)
    need_root
    ensure_dockerd
    import_to_node
    ;;
  env) # where the dockerd this script uses listens (tests look inside the image through it)
    need_root
    exec 3>&2 # progress to stderr: stdout is the one line callers parse
    ensure_dockerd >&2
    echo "DOCKER_HOST=$DOCKER_HOST"
    ;;
  down) stop_dockerd ;;
  *)
    echo "usage: $0 [build|import|env|down]" >&2
    exit 2
    ;;
esac
