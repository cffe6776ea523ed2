#!/usr/bin/env bash
# The whole test suite on a fresh machine: venv from pinned constraints, Kafka jars, the Cosmos emulator's npm
# packages, the other-SDK clients (all cached outside the checkout), then pytest. The pytest fixtures start the real Kafka broker and the
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
# The Java (Maven) and Node clients of tests/integration/test_emulator_sdks.py; the Java one is skipped, with the
# reason, when java or mvn is absent.
scripts/sdk-clients.sh install
# tests/celery/ needs PostgreSQL and Redis (Debian packages) for scripts/celery-stack.sh.
[ "${CHATTER_SKIP_CELERY:-}" = 1 ] || scripts/celery-stack.sh install
echo "test: installs done in $(( $(date +%s) - t0 ))s" >&2

kafka_was_running=0; cosmos_was_running=0
scripts/kafka.sh status >/dev/null 2>&1 && kafka_was_running=1
scripts/cosmos-emulator.sh status >/dev/null 2>&1 && cosmos_was_running=1
cleanup() {
  # A live Airflow stack whose pytest session (the pid in the directory name) is gone, e.g. killed: stopped by its
  # pid files (tests/fixtures/live_airflow.py). A stack of a session still running is left alone.
  local home session
  for home in "${CHATTER_STATE_DIR:-$here/.cache/services}"/airflow-live-test-*/home; do
    session="${home%/home}"; session="${session##*-}"
    [ -d "$home/pids" ] && ! kill -0 "$session" 2>/dev/null || continue
    AIRFLOW_LIVE_HOME="$home" scripts/airflow-live.sh stop >/dev/null 2>&1 || true
  done
  # The same for a CeleryExecutor stack of tests/celery/ (its Airflow, Redis and PostgreSQL).
  for home in "${CHATTER_STATE_DIR:-$here/.cache/services}"/celery-test-*/home; do
    session="${home%/home}"; session="${session##*-}"
    [ -d "$home/pids" ] && ! kill -0 "$session" 2>/dev/null || continue
    CHATTER_STATE_DIR="${home%/home}" AIRFLOW_LIVE_HOME="$home" scripts/celery-stack.sh stop >/dev/null 2>&1 || true
  done
  [ "$kafka_was_running" = 1 ] || scripts/kafka.sh stop >/dev/null 2>&1 || true
  [ "$cosmos_was_running" = 1 ] || scripts/cosmos-emulator.sh stop >/dev/null 2>&1 || true
}
trap cleanup EXIT

# Static checks first: they take seconds and name the line (config in pyproject.toml).
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy

# tests/live/ (in the same run) starts a live Airflow stack with scripts/airflow-live.sh and drives it through REST;
# CHATTER_SKIP_LIVE_AIRFLOW=1 skips those tests (reported as skipped) for a quicker local run. tests/celery/ starts
# the CeleryExecutor stack (scripts/celery-stack.sh: PostgreSQL, Redis, two workers); CHATTER_SKIP_CELERY=1 skips it.
set +e
.venv/bin/python -m pytest -p no:cacheprovider -ra "$@"
rc=$?
set -e
echo "test: finished in $(( $(date +%s) - t0 ))s (pytest exit $rc)" >&2
# pytest's exit 5 (no tests collected) is a failure here too, never a silent pass.
exit $rc
