#!/usr/bin/env bash
# Start the loopback test bed (etcd, kube-apiserver, controller-manager, scheduler, kwok + fake
# nodes) from the tools hack/tools/build.sh cached; reuse what already runs healthy.
# Writes .testbed/kubeconfig and .testbed/env. The pytest fixtures run the same code.
set -euo pipefail
cd "$(dirname "$0")/../.."
py=python3
[[ -x .venv/bin/python ]] && py=.venv/bin/python
exec "$py" hack/testbed/testbed.py up "$@"
