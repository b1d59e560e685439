#!/usr/bin/env bash
# The deployment test (tests/e2e) drives Debian's chromium through Playwright; browser downloads do not
# work here, so a machine without it gets the Debian package (`make test` and `make e2e` call this).
set -euo pipefail
if [ -x "${TFJOB_E2E_CHROMIUM:-/usr/bin/chromium}" ]; then
    exit 0
fi
echo "installing Debian's chromium for the deployment test (tests/e2e)"
SUDO=$([ "$(id -u)" = 0 ] || echo sudo)
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
