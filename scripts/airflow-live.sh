#!/usr/bin/env bash
# A live Airflow on 127.0.0.1, from the project venv: api-server, scheduler, dag-processor and triggerer as separate
# processes (SQLite, LocalExecutor, SimpleAuthManager), with the project's dags/ folder as the DAG bundle. The test
# suite's live fixture (tests/fixtures/live_airflow.py) and users run the same script.
#
#   scripts/airflow-live.sh start    migrate the metadata DB, start the four components, wait until
#                                    /api/v2/monitor/health says all are healthy; prints AIRFLOW_LIVE_* lines
#   scripts/airflow-live.sh stop     stop what this script started (by its pid files, whole process groups)
#   scripts/airflow-live.sh status   say which components run, and where
#   scripts/airflow-live.sh stop-worker N / start-worker N
#                                    (CeleryExecutor only) stop or start Celery worker N alone, e.g. to measure one
#                                    worker against two; start-worker waits until the worker is ready
#   scripts/airflow-live.sh restart-scheduler
#                                    stop the scheduler (TERM to its process groups) and start it again (a fault the
#                                    soak injects: tests/reliability/soak.py)
#   scripts/airflow-live.sh kill-triggerer
#                                    SIGKILL the triggerer's process group (a crash: no clean shutdown), then start a
#                                    new triggerer (tests/live/test_shared_stream_live.py)
#
# Environment (read at start):
#   AIRFLOW_LIVE_PORT           api-server port on 127.0.0.1 (default: a free port, picked at start)
#   AIRFLOW_LIVE_HOME           AIRFLOW_HOME of the stack (default $CHATTER_STATE_DIR/airflow-live)
#   AIRFLOW_LIVE_DAGS_FOLDER    the DAG bundle folder (default the checkout's dags/)
#   AIRFLOW_LIVE_START_TIMEOUT  seconds to wait for health (default 240)
#   AIRFLOW_LIVE_PARALLELISM    task instances running at once ([core] parallelism, every executor): default 4
#                               with LocalExecutor, with Celery every worker slot (workers x concurrency)
#   AIRFLOW_LIVE_SQL_ALCHEMY_CONN  the metadata DB (default SQLite in the home); scripts/celery-stack.sh gives a
#                               PostgreSQL URL
#   AIRFLOW_LIVE_EXECUTOR       LocalExecutor (default) or CeleryExecutor; with Celery, also:
#   AIRFLOW_LIVE_CELERY_BROKER_URL     the broker (e.g. redis://127.0.0.1:<port>/0); required
#   AIRFLOW_LIVE_CELERY_RESULT_BACKEND the result backend (default db+<the metadata DB URL>)
#   AIRFLOW_LIVE_CELERY_WORKERS        how many `airflow celery worker` processes (default 2), named worker1@<host>,
#                                      worker2@<host>, ...; each task instance's hostname says which ran it
#   AIRFLOW_LIVE_WORKER_CONCURRENCY    task slots per Celery worker (default 2)
#   CHATTER_STATE_DIR           state root (default <checkout>/.cache/services)
#   CHATTER_SOURCES_FILE        the sources file the DAG files read (default dags/chatter_sources.yaml)
#   AIRFLOW_CONN_*              connections (JSON or URI), passed to every component as they are: the scheduler,
#                               workers, triggerer and api-server all need them
#   KAFKA_BOOTSTRAP_SERVERS, COSMOS_ENDPOINT, COSMOS_KEY, COSMOS_VERIFY
#                               when set (or in $CHATTER_STATE_DIR/services.env from scripts/services.sh start) and
#                               AIRFLOW_CONN_CHATTER_KAFKA_DEFAULT / AIRFLOW_CONN_CHATTER_COSMOS_DEFAULT are not, those
#                               two connections (the ids dags/chatter_sources.yaml uses) are made from them
# Other AIRFLOW__SECTION__KEY settings in the environment pass through, except the ones this script sets.
#
# Users: admin (role admin) and viewer (role viewer); their generated passwords are in
# $AIRFLOW_LIVE_HOME/passwords.json (mode 600). Nothing listens anywhere but 127.0.0.1: the scheduler and triggerer
# run with --skip-serve-logs (the api-server reads task logs from $AIRFLOW_LIVE_HOME/logs).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
state_root="${CHATTER_STATE_DIR:-$here/.cache/services}"
home="${AIRFLOW_LIVE_HOME:-$state_root/airflow-live}"
pids="$home/pids"
logs="$home/process-logs"
python="$here/.venv/bin/python"
airflow="$here/.venv/bin/airflow"
start_timeout="${AIRFLOW_LIVE_START_TIMEOUT:-240}"
executor="${AIRFLOW_LIVE_EXECUTOR:-LocalExecutor}"
components=(api-server scheduler dag-processor triggerer)
workers=()
if [ "$executor" = CeleryExecutor ]; then
  for ((n = 1; n <= ${AIRFLOW_LIVE_CELERY_WORKERS:-2}; n++)); do workers+=("worker$n"); done
  components+=("${workers[@]}")
elif [ "$executor" != LocalExecutor ]; then
  echo "airflow-live: AIRFLOW_LIVE_EXECUTOR must be LocalExecutor or CeleryExecutor, not $executor" >&2
  exit 2
fi

log() { echo "airflow-live: $*" >&2; }
die() { log "$*"; exit 1; }

# --------------------------------------------------------------------------------------------------------------
# processes (by pid file only; each component leads its own process group)
# --------------------------------------------------------------------------------------------------------------

# A process's start time (clock ticks since boot, /proc/<pid>/stat field 22): with the pid, it names one process, so a
# recycled pid is never mistaken for a component. (Airflow sets process titles, which overwrites /proc/<pid>/environ
# and the command line, so those cannot identify it.)
# Fields are counted after the ")" that closes the command name, which may itself contain spaces.
stat_field() { sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | awk -v n="$2" '{print $(n - 2)}' || true; }
start_time() { stat_field "$1" 22; }

# The pid in a component's pid file ("<pid> <start time>"), if that very process is still alive.
running_pid() {
  local file="$pids/$1.pid" pid started
  [ -f "$file" ] || return 1
  read -r pid started <"$file" || true
  [ -n "${pid:-}" ] && [ -n "${started:-}" ] && kill -0 "$pid" 2>/dev/null || return 1
  local state
  state="$(stat_field "$pid" 3)"
  [ -n "$state" ] && [ "$state" != "Z" ] || return 1
  [ "$(start_time "$pid")" = "$started" ] || return 1
  echo "$pid"
}

# True while a process of group $1 is alive (zombies, already dead but not yet reaped by their parent, do not count).
group_alive() {
  local member
  for member in $(pgrep -g "$1" 2>/dev/null || true); do
    [ "$(stat_field "$member" 3)" = "Z" ] || return 0
  done
  return 1
}

# Every descendant of process $1 (children first found through /proc, then theirs).
descendants() {
  local child
  for child in $(pgrep -P "$1" 2>/dev/null || true); do
    echo "$child"
    descendants "$child"
  done
}

stop_component() {
  local name="$1" pid
  if ! pid="$(running_pid "$name")"; then
    rm -f "$pids/$name.pid"
    return 0
  fi
  # The component was started with setsid, so its pid is its process group id: TERM reaches its children
  # (LocalExecutor workers, task supervisors, uvicorn workers) too. Airflow puts each task runner into a process
  # group of its own, so the groups of the component's descendants are signalled as well (never any other group).
  local groups=("$pid") member group
  for member in $(descendants "$pid"); do
    group="$(stat_field "$member" 5)"
    [ -n "$group" ] && [[ " ${groups[*]} " != *" $group "* ]] && groups+=("$group")
  done
  for group in "${groups[@]}"; do kill -TERM -- "-$group" 2>/dev/null || true; done
  local deadline=$((SECONDS + 30)) alive
  while :; do
    alive=()
    for group in "${groups[@]}"; do group_alive "$group" && alive+=("$group"); done
    [ "${#alive[@]}" -gt 0 ] || break
    if [ "$SECONDS" -ge "$deadline" ]; then
      log "$name (process groups ${alive[*]}) still up after 30 s; sending SIGKILL"
      for group in "${alive[@]}"; do kill -KILL -- "-$group" 2>/dev/null || true; done
      break
    fi
    sleep 0.2
  done
  rm -f "$pids/$name.pid"
  log "stopped $name (process group $pid)"
}

# --------------------------------------------------------------------------------------------------------------
# configuration
# --------------------------------------------------------------------------------------------------------------

free_port() {
  "$python" -c 'import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# Secrets shared by the four components (JWTs between api-server and workers, the Fernet key of stored
# connections), generated once per home and kept there (mode 600), never in the checkout.
ensure_secrets() {
  umask 077
  if [ ! -s "$home/secrets.env" ]; then
    "$python" - >"$home/secrets.env.tmp" <<'PY'
import secrets
from cryptography.fernet import Fernet
print(f"export AIRFLOW__CORE__FERNET_KEY={Fernet.generate_key().decode()}")
print(f"export AIRFLOW__API_AUTH__JWT_SECRET={secrets.token_urlsafe(48)}")
print(f"export AIRFLOW__API__SECRET_KEY={secrets.token_urlsafe(32)}")
PY
    mv "$home/secrets.env.tmp" "$home/secrets.env"
  fi
  if [ ! -s "$home/passwords.json" ]; then
    "$python" -c 'import json, secrets
print(json.dumps({"admin": secrets.token_urlsafe(16), "viewer": secrets.token_urlsafe(16)}))' >"$home/passwords.json.tmp"
    mv "$home/passwords.json.tmp" "$home/passwords.json"
  fi
  umask 022
}

# AIRFLOW_CONN_CHATTER_{KAFKA,COSMOS}_DEFAULT from the services' settings, unless given.
local_connections() {
  if [ -z "${KAFKA_BOOTSTRAP_SERVERS:-}${COSMOS_ENDPOINT:-}" ] && [ -f "$state_root/services.env" ]; then
    # shellcheck disable=SC1091
    . "$state_root/services.env"
  fi
  if [ -z "${AIRFLOW_CONN_CHATTER_KAFKA_DEFAULT:-}" ] && [ -n "${KAFKA_BOOTSTRAP_SERVERS:-}" ]; then
    AIRFLOW_CONN_CHATTER_KAFKA_DEFAULT="$("$python" -c 'import json, os
print(json.dumps({"conn_type": "chatterkafka", "host": os.environ["KAFKA_BOOTSTRAP_SERVERS"],
                  "extra": {"security_protocol": "PLAINTEXT"}}))')"
    export AIRFLOW_CONN_CHATTER_KAFKA_DEFAULT
  fi
  if [ -z "${AIRFLOW_CONN_CHATTER_COSMOS_DEFAULT:-}" ] && [ -n "${COSMOS_ENDPOINT:-}" ] && [ -n "${COSMOS_KEY:-}" ]; then
    AIRFLOW_CONN_CHATTER_COSMOS_DEFAULT="$("$python" -c 'import json, os
verify = os.environ.get("COSMOS_VERIFY", "true")
extra = {"database_name": "chatter-demo", "connection_verify": verify.lower() not in ("0", "false", "no")}
if verify.lower() not in ("", "0", "1", "true", "false", "yes", "no"):
    extra["ca_cert_path"] = verify
print(json.dumps({"conn_type": "chattercosmos", "host": os.environ["COSMOS_ENDPOINT"],
                  "password": os.environ["COSMOS_KEY"], "extra": extra}))')"
    export AIRFLOW_CONN_CHATTER_COSMOS_DEFAULT
  fi
}

export_settings() {
  local port="$1" dags="$2"
  export AIRFLOW_HOME="$home"
  export AIRFLOW__CORE__DAGS_FOLDER="$dags"
  export AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST="[{\"name\": \"chatter-dags\", \"classpath\": \"airflow.dag_processing.bundles.local.LocalDagBundle\", \"kwargs\": {\"path\": \"$dags\"}}]"
  export AIRFLOW__CORE__PLUGINS_FOLDER="$home/plugins"
  export AIRFLOW__CORE__LOAD_EXAMPLES=False
  export AIRFLOW__CORE__LAZY_LOAD_PLUGINS=False
  export AIRFLOW__CORE__EXECUTOR="$executor"
  export AIRFLOW__CORE__PARALLELISM="${AIRFLOW_LIVE_PARALLELISM:-4}"
  export AIRFLOW__CORE__EXECUTION_API_SERVER_URL="http://127.0.0.1:$port/execution/"
  export AIRFLOW__CORE__AUTH_MANAGER=airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager
  export AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS="admin:admin,viewer:viewer"
  export AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE="$home/passwords.json"
  export AIRFLOW__CORE__TEST_CONNECTION=Enabled
  export AIRFLOW__DATABASE__SQL_ALCHEMY_CONN="${AIRFLOW_LIVE_SQL_ALCHEMY_CONN:-sqlite:///$home/airflow.db}"
  if [ "$executor" = CeleryExecutor ]; then
    [ -n "${AIRFLOW_LIVE_CELERY_BROKER_URL:-}" ] || die "AIRFLOW_LIVE_CELERY_BROKER_URL is required with CeleryExecutor"
    export AIRFLOW__CELERY__BROKER_URL="$AIRFLOW_LIVE_CELERY_BROKER_URL"
    export AIRFLOW__CELERY__RESULT_BACKEND="${AIRFLOW_LIVE_CELERY_RESULT_BACKEND:-db+$AIRFLOW__DATABASE__SQL_ALCHEMY_CONN}"
    export AIRFLOW__CELERY__WORKER_CONCURRENCY="${AIRFLOW_LIVE_WORKER_CONCURRENCY:-2}"
    # [core] parallelism caps the running task instances of every executor: below the workers' slots it leaves
    # slots idle and queues one DAG's tasks behind another's (a following drain holds a slot per lease all the time).
    export AIRFLOW__CORE__PARALLELISM="${AIRFLOW_LIVE_PARALLELISM:-$(( ${#workers[@]} * AIRFLOW__CELERY__WORKER_CONCURRENCY ))}"
    # Several workers on one host: each task instance records CHATTER_WORKER_NAME@<host> as its hostname.
    export AIRFLOW__CORE__HOSTNAME_CALLABLE=airflow_chatter.airflow.utils.hostname.worker_hostname
  fi
  export AIRFLOW__DATABASE__LOAD_DEFAULT_CONNECTIONS=False
  export AIRFLOW__LOGGING__BASE_LOG_FOLDER="$home/logs"
  export AIRFLOW__API__HOST=127.0.0.1
  export AIRFLOW__API__PORT="$port"
  export AIRFLOW__API__BASE_URL="http://127.0.0.1:$port"
  export AIRFLOW__API__WORKERS=1
  export AIRFLOW__SCHEDULER__ENABLE_HEALTH_CHECK=False
  # shellcheck disable=SC1091
  . "$home/secrets.env"
  export CHATTER_SOURCES_FILE="${CHATTER_SOURCES_FILE:-$dags/chatter_sources.yaml}"
}

health() {
  "$python" - "$1" <<'PY'
import json, sys, urllib.request
try:
    with urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/api/v2/monitor/health", timeout=3) as response:
        body = json.load(response)
except Exception as error:  # noqa: BLE001 - not up yet
    print(f"no answer ({type(error).__name__})")
    sys.exit(1)
states = {name: (part or {}).get("status") for name, part in body.items()}
print(" ".join(f"{name}={state}" for name, state in sorted(states.items())))
sys.exit(0 if set(states) >= {"metadatabase", "scheduler", "triggerer", "dag_processor"}
         and all(state == "healthy" for state in states.values()) else 1)
PY
}

# --------------------------------------------------------------------------------------------------------------
# start / stop / status
# --------------------------------------------------------------------------------------------------------------

cmd_start() {
  [ -x "$airflow" ] || die "no $airflow; run scripts/bootstrap.sh first"
  mkdir -p "$home" "$pids" "$logs"
  exec 8>"$home/.lock"
  flock -w 60 8 || die "another airflow-live.sh holds $home/.lock"
  local running=0 name
  for name in "${components[@]}"; do running_pid "$name" >/dev/null && running=$((running + 1)); done
  if [ "$running" = "${#components[@]}" ]; then
    local port
    port="$(cat "$home/port")"
    log "already running on 127.0.0.1:$port"
    health "$port" >&2 || die "running but not healthy; see $logs"
    print_connection "$port" 0
    return 0
  fi
  [ "$running" = 0 ] || { log "a partial stack is running; stopping it first"; cmd_stop_locked; }

  local port="${AIRFLOW_LIVE_PORT:-}"
  [ -n "$port" ] || port="$(free_port)"
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then die "127.0.0.1:$port is already in use"; fi
  local dags
  dags="$(cd "${AIRFLOW_LIVE_DAGS_FOLDER:-$here/dags}" && pwd)"
  ensure_secrets
  local_connections
  export_settings "$port" "$dags"
  echo "$port" >"$home/port"

  log "migrating ${AIRFLOW__DATABASE__SQL_ALCHEMY_CONN%%:*} metadata DB"
  timeout 180 "$airflow" db migrate >"$logs/db-migrate.log" 2>&1 || { tail -n 30 "$logs/db-migrate.log" >&2; die "db migrate failed"; }

  local -A args=(
    [api-server]="api-server --host 127.0.0.1 --port $port --workers 1"
    [scheduler]="scheduler --skip-serve-logs"
    [dag-processor]="dag-processor"
    [triggerer]="triggerer --skip-serve-logs"
  )
  for name in "${components[@]}"; do
    case "$name" in worker*) start_worker "$name"; continue ;; esac
    # shellcheck disable=SC2086 # the argument lists above are word-split on purpose
    setsid "$airflow" ${args[$name]} </dev/null >"$logs/$name.log" 2>&1 8>&- &
    echo "$! $(start_time $!)" >"$pids/$name.pid"
  done
  log "started ${components[*]} on 127.0.0.1:$port (home $home); waiting for health (at most ${start_timeout}s)"

  local deadline=$((SECONDS + start_timeout)) last=""
  until last="$(health "$port")" && workers_ready; do
    for name in "${components[@]}"; do
      if ! running_pid "$name" >/dev/null; then
        tail -n 40 "$logs/$name.log" >&2 || true
        cmd_stop_locked
        die "$name exited during start-up; its log is $logs/$name.log"
      fi
    done
    if [ "$SECONDS" -ge "$deadline" ]; then
      cmd_stop_locked
      die "not healthy within ${start_timeout}s (last: $last); logs in $logs"
    fi
    sleep 1
  done
  log "healthy: $last"
  print_connection "$port" 1
}

# Celery worker N: `airflow celery worker -H workerN@%h`, its own Celery pid file, no log server (the api-server
# reads task logs from $AIRFLOW_LIVE_HOME/logs).
start_worker() {
  local name="$1"
  : >"$logs/$name.log"
  CHATTER_WORKER_NAME="$name" setsid "$airflow" celery worker -H "$name@%h" --pid "$pids/$name.celery.pid" \
    --skip-serve-logs </dev/null >"$logs/$name.log" 2>&1 8>&- &
  echo "$! $(start_time $!)" >"$pids/$name.pid"
}

# Every Celery worker has said "ready" (it consumes from the broker).
workers_ready() {
  local name
  for name in "${workers[@]}"; do grep -q "$name@.* ready\." "$logs/$name.log" 2>/dev/null || return 1; done
}

cmd_worker() {
  local action="$1" name="worker${2:-}"
  [ "$executor" = CeleryExecutor ] || die "$action-worker needs AIRFLOW_LIVE_EXECUTOR=CeleryExecutor"
  [[ " ${workers[*]} " == *" $name "* ]] || die "no Celery worker '${2:-}' (workers: ${workers[*]})"
  exec 8>"$home/.lock"
  flock -w 60 8 || die "another airflow-live.sh holds $home/.lock"
  if [ "$action" = stop ]; then stop_component "$name"; return 0; fi
  running_pid api-server >/dev/null || die "the stack is not running; start it first"
  running_pid "$name" >/dev/null && { log "$name already running"; return 0; }
  local port dags
  port="$(cat "$home/port")"
  dags="$(cd "${AIRFLOW_LIVE_DAGS_FOLDER:-$here/dags}" && pwd)"
  local_connections
  export_settings "$port" "$dags"
  start_worker "$name"
  local deadline=$((SECONDS + start_timeout))
  until grep -q "$name@.* ready\." "$logs/$name.log" 2>/dev/null; do
    running_pid "$name" >/dev/null || { tail -n 40 "$logs/$name.log" >&2; die "$name exited during start-up"; }
    [ "$SECONDS" -lt "$deadline" ] || { stop_component "$name"; die "$name not ready within ${start_timeout}s"; }
    sleep 1
  done
  log "started $name"
}

cmd_restart_scheduler() {
  exec 8>"$home/.lock"
  flock -w 60 8 || die "another airflow-live.sh holds $home/.lock"
  running_pid api-server >/dev/null || die "the stack is not running; start it first"
  stop_component scheduler
  local port dags
  port="$(cat "$home/port")"
  dags="$(cd "${AIRFLOW_LIVE_DAGS_FOLDER:-$here/dags}" && pwd)"
  local_connections
  export_settings "$port" "$dags"
  setsid "$airflow" scheduler --skip-serve-logs </dev/null >>"$logs/scheduler.log" 2>&1 8>&- &
  echo "$! $(start_time $!)" >"$pids/scheduler.pid"
  log "restarted scheduler"
}

# SIGKILL the triggerer's whole process group (no clean shutdown: what a crashed host does), then start a new one.
cmd_kill_triggerer() {
  exec 8>"$home/.lock"
  flock -w 60 8 || die "another airflow-live.sh holds $home/.lock"
  running_pid api-server >/dev/null || die "the stack is not running; start it first"
  local pid
  if pid="$(running_pid triggerer)"; then
    kill -KILL -- "-$pid" 2>/dev/null || true
    local deadline=$((SECONDS + 30))
    while group_alive "$pid" && [ $SECONDS -lt $deadline ]; do sleep 0.2; done
  fi
  rm -f "$pids/triggerer.pid"
  local port dags
  port="$(cat "$home/port")"
  dags="$(cd "${AIRFLOW_LIVE_DAGS_FOLDER:-$here/dags}" && pwd)"
  local_connections
  export_settings "$port" "$dags"
  setsid "$airflow" triggerer --skip-serve-logs </dev/null >>"$logs/triggerer.log" 2>&1 8>&- &
  echo "$! $(start_time $!)" >"$pids/triggerer.pid"
  log "killed and restarted triggerer"
}

print_connection() {
  echo "AIRFLOW_LIVE_URL=http://127.0.0.1:$1"
  echo "AIRFLOW_LIVE_HOME=$home"
  echo "AIRFLOW_LIVE_PASSWORDS_FILE=$home/passwords.json"
  echo "AIRFLOW_LIVE_STARTED=$2"
}

cmd_stop_locked() {
  local name
  # The api-server last: workers still report to it while the scheduler shuts them down.
  # Celery workers first, by their pid files (whatever AIRFLOW_LIVE_CELERY_WORKERS says now).
  local file
  for file in "$pids"/worker*.pid; do
    [ -e "$file" ] || continue
    case "$file" in *.celery.pid) continue ;; esac
    name="${file##*/}"; stop_component "${name%.pid}"
  done
  for name in triggerer dag-processor scheduler api-server; do stop_component "$name"; done
}

cmd_stop() {
  [ -d "$home" ] || { log "no stack in $home; nothing to stop"; return 0; }
  exec 8>"$home/.lock"
  flock -w 120 8 || die "another airflow-live.sh holds $home/.lock"
  cmd_stop_locked
}

cmd_status() {
  local name pid up=0
  for name in "${components[@]}"; do
    if pid="$(running_pid "$name")"; then
      echo "$name: running (process group $pid)"
      up=$((up + 1))
    else
      echo "$name: not running"
    fi
  done
  [ "$up" -gt 0 ] || return 3
  local port
  port="$(cat "$home/port")"
  echo "url: http://127.0.0.1:$port"
  health "$port" || return 1
}

case "${1:-}" in
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  stop-worker) cmd_worker stop "${2:-}" ;;
  start-worker) cmd_worker start "${2:-}" ;;
  restart-scheduler) cmd_restart_scheduler ;;
  kill-triggerer) cmd_kill_triggerer ;;
  *) echo "usage: $0 {start|stop|status|stop-worker N|start-worker N|restart-scheduler|kill-triggerer}" >&2; exit 2 ;;
esac
