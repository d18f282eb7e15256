# stream-autoscaler: the two commands a newcomer needs are `make demo` and `make test`.
# Every target installs what it needs (a virtualenv in .venv, tools cached in ~/.cache).
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
SA := $(VENV)/bin/stream-autoscaler
OUT ?= out/demo

.PHONY: setup jvm-archive demo simulate test lint unit bench bench-unseen bench-restarts tools browser image image-down node-deps testbed testbed-down kind-up kind-burst kind-down clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml hack/setup-python.sh
	hack/setup-python.sh

## A class-data-sharing archive of the classes a Spark driver loads, for this venv's PySpark:
## its local JVMs (drivers, executors, the mini-cluster) map it instead of reading the jars at
## every start. One Spark query once per machine and PySpark build; seconds when up to date.
jvm-archive: setup
	hack/jvm-archive/build.sh

## The main job: the embedded closed loop (real Spark, a burst, Prometheus, the controller).
demo: setup jvm-archive
	$(SA) demo --out $(OUT)

## The same engine against a model of the job, beside every baseline.
simulate: setup
	$(SA) simulate --trace traces/burst.csv --baseline all --out out/simulate

## The README's test command: lint, the pure core, then every tier against real components.
## hack/prepare.sh installs what the tiers need in two timed lanes (the Go compile beside apt).
test:
	hack/prepare.sh
	hack/test.sh

## Static checks: style, types of the pure core, and the layering (import-linter, pyproject.toml).
lint: setup
	hack/lint.sh

unit: setup
	$(PY) -m pytest tests/unit -q

bench: setup
	$(PY) benchmarks/scenarios.py

## The engine on random loads nobody tuned it on (SEED picks the set), against the Flink rule
## and the static sizes; prints where it lost.
SEED ?= 1
COUNT ?= 12
bench-unseen: setup
	$(PY) benchmarks/unseen.py --seed $(SEED) --count $(COUNT)

## Each restart kind on real Spark, step by step, beside the runner of BASELINE (a git revision;
## default: benchmarks/restarts.py's BASELINE_REVISION, the runner before the restart work).
BASELINE ?=
bench-restarts: setup
	$(PY) benchmarks/restarts.py $(if $(BASELINE),--baseline $(BASELINE)) $(BENCH_RESTARTS_ARGS)

## Test-bed tools (kube-apiserver, etcd, kwok, helm, ...) built from Go modules, cached.
tools:
	@if [ -x hack/tools/build.sh ]; then hack/tools/build.sh; fi

## A headless chromium (Debian's) for the report's browser test; installed only when missing.
browser:
	hack/browser.sh

## stream-autoscaler:dev without a registry: Debian's docker.io, a debootstrap base, cached
## (seconds when nothing changed); also imported into the test bed's real node when it runs.
image:
	hack/image/build.sh

## Stop the dockerd `make image` started (if it started one).
image-down:
	hack/image/build.sh down

## The control plane, kwok nodes and (as root) one real node; see docs/testbed.md.
testbed: setup tools node-deps
	hack/testbed/up.sh

## Debian packages the real node needs (containerd, runc, CNI plugins, iptables, conntrack).
node-deps:
	hack/testbed/node-deps.sh

testbed-down:
	hack/testbed/down.sh

## A kind cluster (1 control plane, 2 workers sharing the checkpoint directory) with the chart
## installed; on a host that cannot pull kind's node image, one built here (hack/kind/node-image.sh).
kind-up: setup tools
	hack/kind/up.sh

## A burst StreamJob on that cluster, watched live; the report lands in out/kind-burst/.
## Failures under the burst: KIND_BURST_ARGS="--kill-controller --lose-worker --kill-executor --lose-driver-node".
kind-burst: kind-up
	$(PY) -m app.kind_burst --out out/kind-burst --kubectl .kind/bin/kubectl \
	  --shared "$${KIND_SHARED_DIR:-$(CURDIR)/.kind/shared}" $(KIND_BURST_ARGS)

## Delete the kind cluster (the shared directory stays under .kind/).
kind-down:
	hack/kind/delete-cluster.sh

clean:
	-hack/testbed/down.sh
	-hack/image/build.sh down
	rm -rf $(VENV) out .testbed
