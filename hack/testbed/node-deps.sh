#!/usr/bin/env bash
# The real node's host packages, from Debian (what `make testbed` and `make test` need for it):
# containerd + runc (the runtime), containernetworking-plugins (bridge, host-local, loopback,
# portmap in /usr/lib/cni), iptables, iproute2 and conntrack (kube-proxy, the bridge).
# Installs only what is missing; as non-root it says so and leaves the node out (the test bed
# then starts without it and the node tier skips, or fails under CI=true).
set -euo pipefail
declare -A need=(
  [containerd]=/usr/bin/containerd [runc]=/usr/sbin/runc [iptables]=/usr/sbin/iptables
  [iproute2]=/usr/sbin/ip [conntrack]=/usr/sbin/conntrack
  [containernetworking-plugins]=/usr/lib/cni/bridge
)
missing=()
for pkg in "${!need[@]}"; do
  [[ -e "${need[$pkg]}" ]] || missing+=("$pkg")
done
((${#missing[@]})) || exit 0
if [[ $(id -u) != 0 ]]; then
  echo "node-deps: not root: the real node needs ${missing[*]} and root; the test bed runs without it" >&2
  exit 0
fi
echo "node-deps: installing Debian packages for the real node: ${missing[*]}"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
