#!/usr/bin/env bash
# Creates .venv and installs the project with everything its commands and tests need.
# Idempotent: re-running only installs what changed.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
PYTHON=${PYTHON:-python3}
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  echo "setup: Python >= 3.11 is required (found $("$PYTHON" --version 2>&1))" >&2
  exit 1
fi
if ! command -v java >/dev/null 2>&1; then
  echo "setup: Java 17 is required by Spark; installing openjdk-17-jre-headless" >&2
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq && $SUDO apt-get install -y -qq openjdk-17-jre-headless
fi
# Prometheus (the demo's metrics store, and a real component of the integration tests).
if [ -z "${PROMETHEUS_BIN:-}" ] && ! command -v prometheus >/dev/null 2>&1; then
  echo "setup: installing Debian's prometheus package" >&2
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends prometheus
fi
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip
"$VENV/bin/python" -m pip install -q -e ".[spark,dev]"
touch "$VENV/.installed"
echo "setup: $VENV ready ($("$VENV/bin/python" --version))"
