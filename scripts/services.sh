#!/usr/bin/env bash
# The production-shaped deployment test (tests/e2e/test_failover.py) runs Airflow on Debian's PostgreSQL
# (metadata database) and Redis (Celery's broker), each started by the test on 127.0.0.1 and stopped
# after it; a machine without them gets the Debian packages (`make test` and `make e2e` call this). The
# packages' own services are not used (the test runs its own server processes in temporary folders).
set -euo pipefail
missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
compgen -G "/usr/lib/postgresql/*/bin/postgres" >/dev/null || missing+=(postgresql)
if [ ${#missing[@]} -eq 0 ]; then
    exit 0
fi
echo "installing Debian's ${missing[*]} for the deployment test (tests/e2e)"
SUDO=$([ "$(id -u)" = 0 ] || echo sudo)
$SUDO apt-get update -qq
# policy-rc.d: the packages' post-install scripts must not start their system services here.
DEBIAN_FRONTEND=noninteractive RUNLEVEL=1 $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
