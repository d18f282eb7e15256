#!/usr/bin/env bash
# A headless browser for the tests (`make test`): Debian's chromium renders the demo's
# report.html in tests/integration/report, so "the plot is visible" is checked, not assumed.
# Installs only when missing; the demo itself does not need it.
set -euo pipefail
if [ -n "${CHROMIUM_BIN:-}" ] || command -v chromium >/dev/null 2>&1; then
  exit 0
fi
echo "browser: installing Debian's chromium package (headless report test)" >&2
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends chromium >/dev/null
