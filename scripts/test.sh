#!/usr/bin/env bash
# The whole test suite on a fresh machine: venv from pinned constraints, Kafka jars, the Cosmos emulator,
# start the services, run pytest, stop what was started. Exits non-zero on any failure.
# Extra arguments go to pytest (e.g. scripts/test.sh tests/unit -x).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"

t0=$(date +%s)
scripts/bootstrap.sh
scripts/kafka.sh install
scripts/cosmos-emulator.sh install
echo "test: installs done in $(( $(date +%s) - t0 ))s" >&2

cleanup() { scripts/services.sh stop >/dev/null 2>&1 || true; }
trap cleanup EXIT
scripts/services.sh start
# shellcheck disable=SC1091
source .cache/services/services.env

set +e
.venv/bin/python -m pytest -p no:cacheprovider -ra "$@"
rc=$?
set -e
echo "test: finished in $(( $(date +%s) - t0 ))s (pytest exit $rc)" >&2
# pytest exit 5 = no tests collected: that is a failure here, never a silent pass.
exit $rc
