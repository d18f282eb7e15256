#!/usr/bin/env bash
# Everything `make test` needs before the first test, in two lanes, each step timed:
#   lane 1 (CPU: Go compiles)   make tools: the test-bed binaries, Kafka and S3A jars, moto
#   lane 2 (network and disk)   make setup (venv, Java, Prometheus), node-deps, browser, and the
#                               image (root only: dockerd + debootstrap; the node tier imports it);
#                               once the venv is there, the lanes' JVM class archive beside them
#                               (hack/jvm-archive/build.sh: one Spark query, ~60 s once per machine)
# On a cold machine the Kubernetes compile is the longest step and uses both cores; the other
# lane mostly waits on downloads, so running it beside the compile costs little and saves its
# whole time. Lane 2 is sequential because its steps share apt's lock. Warm, every step only
# compares stamps (seconds). A failed step fails `make test`, with its output.
set -euo pipefail
cd "$(dirname "$0")/.."
t0=$SECONDS

step() { # name, command...: runs it, then says how long it took
  local name=$1 start=$SECONDS
  shift
  "$@"
  echo "prepare: $name done in $((SECONDS - start)) s"
}

lane1() {
  set -o pipefail
  step tools make -s tools 2>&1 | sed -u 's/^/[tools] /'
}
lane1 &
tools_pid=$!

lane2() { # each step stops the lane on failure (errexit does not hold under `||`)
  step setup make -s setup || return
  (step jvm-archive hack/jvm-archive/build.sh 2>&1 | sed -u 's/^/[jvm-archive] /') &
  local archive_pid=$!
  step node-deps make -s node-deps || return
  step browser make -s browser || return
  if [[ $(id -u) == 0 ]]; then
    # The node tier needs stream-autoscaler:dev; built here it overlaps the compile, and the
    # tier's own build.sh call then finds it up to date (~1 s).
    step image hack/image/build.sh build || return
  fi
  wait "$archive_pid" || { echo "prepare: the JVM class archive failed (above, [jvm-archive])" >&2; return 1; }
}
rc=0
lane2 || rc=$?

if ! wait "$tools_pid"; then
  echo "prepare: make tools failed (its output above, prefixed [tools])" >&2
  exit 1
fi
((rc == 0)) || { echo "prepare: a step of lane 2 failed (exit $rc)" >&2; exit "$rc"; }
echo "prepare: everything ready in $((SECONDS - t0)) s"
