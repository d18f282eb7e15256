#!/usr/bin/env bash
# Pod networking for a kind cluster created with `disableDefaultCNI: true` (our node image has no
# kindnetd): on every node, the CNI plugins' ptp + host-local over the node's pod subnet, and a
# route to every other node's pod subnet through that node's address on the kind network, which is
# what kindnetd itself sets up. Idempotent: run it again after a node restarts (its routes are gone).
#   hack/kind/cni.sh
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
need kind kubectl docker
ctx=(--context "kind-$KIND_CLUSTER")

declare -A ip cidr
nodes=$(kind get nodes --name "$KIND_CLUSTER")
for n in $nodes; do
  ip[$n]=$(docker inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' "$n")
  for _ in $(seq 60); do # the controller manager allocates it just after the node registers
    cidr[$n]=$(kubectl "${ctx[@]}" get node "$n" -o jsonpath='{.spec.podCIDR}' 2>/dev/null || true)
    [[ -n "${cidr[$n]}" ]] && break
    sleep 1
  done
  [[ -n "${cidr[$n]}" ]] || { echo "cni: node $n has no pod subnet (is the controller manager up?)" >&2; exit 1; }
done
for n in $nodes; do
  docker exec -i "$n" sh -c 'cat >/etc/cni/net.d/10-kind-ptp.conflist' <<CONF
{
  "cniVersion": "1.0.0",
  "name": "kind",
  "plugins": [
    {
      "type": "ptp",
      "ipMasq": false,
      "mtu": 1500,
      "ipam": {
        "type": "host-local",
        "dataDir": "/run/cni-ipam-state",
        "routes": [{"dst": "0.0.0.0/0"}],
        "ranges": [[{"subnet": "${cidr[$n]}"}]]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
CONF
  for m in $nodes; do
    [[ $m == "$n" ]] && continue
    docker exec "$n" ip route replace "${cidr[$m]}" via "${ip[$m]}"
  done
  echo "cni: $n ${ip[$n]} pods ${cidr[$n]}"
done
