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
# The full run is two pytest sessions side by side (below); the second has its own broker, emulator and state.
state_a="${CHATTER_STATE_DIR:-$here/.cache/services}"
state_b="$state_a/second-session"
port_b_kafka="${CHATTER_SECOND_KAFKA_PORT:-19692}"
port_b_cosmos="${CHATTER_SECOND_COSMOS_PORT:-8091}"
b_kafka_was_running=0; b_cosmos_was_running=0
KAFKA_PORT=$port_b_kafka CHATTER_STATE_DIR=$state_b scripts/kafka.sh status >/dev/null 2>&1 && b_kafka_was_running=1
COSMOS_EMULATOR_PORT=$port_b_cosmos CHATTER_STATE_DIR=$state_b scripts/cosmos-emulator.sh status >/dev/null 2>&1 \
  && b_cosmos_was_running=1
b_pid=""
cleanup() {
  [ -z "$b_pid" ] || kill -- "-$b_pid" 2>/dev/null || true
  # A live Airflow stack whose pytest session (the pid in the directory name) is gone, e.g. killed: stopped by its
  # pid files (tests/fixtures/live_airflow.py). A stack of a session still running is left alone.
  local home session
  for home in "$state_a"/airflow-live-test-*/home "$state_b"/airflow-live-test-*/home; do
    session="${home%/home}"; session="${session##*-}"
    [ -d "$home/pids" ] && ! kill -0 "$session" 2>/dev/null || continue
    AIRFLOW_LIVE_HOME="$home" scripts/airflow-live.sh stop >/dev/null 2>&1 || true
  done
  # The same for a CeleryExecutor stack of tests/celery/ (its Airflow, Redis and PostgreSQL).
  for home in "$state_a"/celery-test-*/home "$state_b"/celery-test-*/home; do
    session="${home%/home}"; session="${session##*-}"
    [ -d "$home/pids" ] && ! kill -0 "$session" 2>/dev/null || continue
    CHATTER_STATE_DIR="${home%/home}" AIRFLOW_LIVE_HOME="$home" scripts/celery-stack.sh stop >/dev/null 2>&1 || true
  done
  [ "$kafka_was_running" = 1 ] || scripts/kafka.sh stop >/dev/null 2>&1 || true
  [ "$cosmos_was_running" = 1 ] || scripts/cosmos-emulator.sh stop >/dev/null 2>&1 || true
  [ "$b_kafka_was_running" = 1 ] || KAFKA_PORT=$port_b_kafka CHATTER_STATE_DIR=$state_b scripts/kafka.sh stop \
    >/dev/null 2>&1 || true
  [ "$b_cosmos_was_running" = 1 ] || COSMOS_EMULATOR_PORT=$port_b_cosmos CHATTER_STATE_DIR=$state_b \
    scripts/cosmos-emulator.sh stop >/dev/null 2>&1 || true
}
trap cleanup EXIT

# Static checks first: they take seconds and name the line (config in pyproject.toml).
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy

# tests/live/ (in the same run) starts a live Airflow stack with scripts/airflow-live.sh and drives it through REST;
# CHATTER_SKIP_LIVE_AIRFLOW=1 skips those tests (reported as skipped) for a quicker local run. tests/celery/ starts
# the CeleryExecutor stack (scripts/celery-stack.sh: PostgreSQL, Redis, two workers); CHATTER_SKIP_CELERY=1 skips it.
#
# With no arguments the suite runs as two pytest sessions at once: tests/live and tests/celery (live Airflow stacks
# driven through REST and Chromium: about half of the suite's time, mostly waiting on the stacks) in the second
# session, on its own broker (port $port_b_kafka), emulator (port $port_b_cosmos) and state directory, and everything
# else in the first, so that the two halves' waiting overlaps. The second session's output follows the first's. With arguments, one
# session runs them. CHATTER_TEST_SESSIONS=1 runs the whole suite as one session.
slow=(tests/live tests/celery)
set +e
if [ $# -eq 0 ] && [ "${CHATTER_TEST_SESSIONS:-2}" = 2 ]; then
  mkdir -p "$state_b"
  log_b="$state_b/pytest.log"
  # setsid: the trap stops the whole second session (and what it started) if this script is killed.
  KAFKA_PORT=$port_b_kafka COSMOS_EMULATOR_PORT=$port_b_cosmos CHATTER_STATE_DIR=$state_b \
    setsid .venv/bin/python -m pytest -p no:cacheprovider -ra --basetemp="$state_b/pytest-tmp" "${slow[@]}" \
    >"$log_b" 2>&1 </dev/null &
  b_pid=$!
  echo "test: second session (${slow[*]}) started, pid $b_pid, log $log_b" >&2
  .venv/bin/python -m pytest -p no:cacheprovider -ra "${slow[@]/#/--ignore=}"
  rc_a=$?
  echo "test: first session finished in $(( $(date +%s) - t0 ))s (pytest exit $rc_a); waiting for the second" >&2
  wait "$b_pid"
  rc_b=$?
  b_pid=""
  echo; echo "=============== second session: ${slow[*]} ==============="
  cat "$log_b"
  echo "test: second session exit $rc_b" >&2
  rc=$(( rc_a != 0 ? rc_a : rc_b ))
else
  .venv/bin/python -m pytest -p no:cacheprovider -ra "$@"
  rc=$?
fi
set -e
echo "test: finished in $(( $(date +%s) - t0 ))s (pytest exit $rc)" >&2
# pytest's exit 5 (no tests collected) is a failure here too, never a silent pass.
exit $rc
