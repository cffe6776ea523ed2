#!/usr/bin/env bash
# The whole test suite on a fresh machine: venv from pinned constraints, Kafka jars, the Cosmos emulator's npm
# packages (all cached outside the checkout), then pytest. The pytest fixtures start the real Kafka broker and the
# emulator on 127.0.0.1 (or use KAFKA_BOOTSTRAP_SERVERS / COSMOS_ENDPOINT+COSMOS_KEY when set) and stop what they
# started; a trap stops anything a killed run left behind. Exits non-zero on any failure.
# Extra arguments go to pytest (e.g. scripts/test.sh tests/unit -x).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"

t0=$(date +%s)
scripts/bootstrap.sh
[ -n "${KAFKA_BOOTSTRAP_SERVERS:-}" ] || scripts/kafka.sh install
[ -n "${COSMOS_ENDPOINT:-}" ] || scripts/cosmos-emulator.sh install
echo "test: installs done in $(( $(date +%s) - t0 ))s" >&2

kafka_was_running=0; cosmos_was_running=0
scripts/kafka.sh status >/dev/null 2>&1 && kafka_was_running=1
scripts/cosmos-emulator.sh status >/dev/null 2>&1 && cosmos_was_running=1
cleanup() {
  [ "$kafka_was_running" = 1 ] || scripts/kafka.sh stop >/dev/null 2>&1 || true
  [ "$cosmos_was_running" = 1 ] || scripts/cosmos-emulator.sh stop >/dev/null 2>&1 || true
}
trap cleanup EXIT

# Static checks first: they take seconds and name the line (config in pyproject.toml).
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy

set +e
.venv/bin/python -m pytest -p no:cacheprovider -ra "$@"
rc=$?
set -e
echo "test: finished in $(( $(date +%s) - t0 ))s (pytest exit $rc)" >&2
# pytest's exit 5 (no tests collected) is a failure here too, never a silent pass.
exit $rc
