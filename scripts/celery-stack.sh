#!/usr/bin/env bash
# Airflow on the CeleryExecutor, all on 127.0.0.1: a private PostgreSQL cluster (the metadata DB), a private Redis
# (the Celery broker), and scripts/airflow-live.sh's api-server, scheduler, dag-processor and triggerer plus
# AIRFLOW_LIVE_CELERY_WORKERS (default 2) `airflow celery worker` processes named worker1@<host>, worker2@<host>...
#
#   scripts/celery-stack.sh install   the Debian packages postgresql and redis-server (apt-get update once, then
#                                     apt-get install -y, each only if missing) and the venv's `celery` extra
#   scripts/celery-stack.sh start     start PostgreSQL, Redis, then the Airflow stack; prints AIRFLOW_LIVE_* lines
#   scripts/celery-stack.sh stop      stop what start started (Airflow by its pid files, then Redis, then PostgreSQL)
#   scripts/celery-stack.sh status    say what runs
#   scripts/celery-stack.sh stop-worker N / start-worker N   one Celery worker alone (scripts/airflow-live.sh)
#   scripts/celery-stack.sh restart-scheduler                 the scheduler stopped and started (airflow-live.sh)
#
# Environment (read at start):
#   CELERY_STACK_HOME       state of this stack (default $CHATTER_STATE_DIR/celery-stack): pg/ (the cluster), redis/,
#                           airflow/ (AIRFLOW_LIVE_HOME unless that is set), secrets (mode 600)
#   CELERY_STACK_PG_PORT, CELERY_STACK_REDIS_PORT   loopback ports (default: free ports, picked at the first start
#                           and kept in the home)
#   CELERY_STACK_START_TIMEOUT   seconds PostgreSQL and Redis each get to answer (default 60)
#   everything scripts/airflow-live.sh reads (AIRFLOW_LIVE_PORT, AIRFLOW_LIVE_WORKER_CONCURRENCY, AIRFLOW_CONN_*, ...)
#
# The system's postgresql/redis services are never used or started: the cluster runs as the `postgres` user from
# the home's pg/ directory (initdb + pg_ctl), listening on 127.0.0.1 and a socket in the home only, with a generated
# password; Redis runs with --bind 127.0.0.1, a generated password, and no persistence.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
state_root="${CHATTER_STATE_DIR:-$here/.cache/services}"
home="${CELERY_STACK_HOME:-$state_root/celery-stack}"
python="$here/.venv/bin/python"
start_timeout="${CELERY_STACK_START_TIMEOUT:-60}"
export AIRFLOW_LIVE_HOME="${AIRFLOW_LIVE_HOME:-$home/airflow}"
export AIRFLOW_LIVE_EXECUTOR=CeleryExecutor

log() { echo "celery-stack: $*" >&2; }
die() { log "$*"; exit 1; }

pg_bin() {
  local dir
  for dir in /usr/lib/postgresql/*/bin; do [ -x "$dir/pg_ctl" ] && { echo "$dir"; return 0; }; done
  return 1
}

free_port() {
  "$python" -c 'import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# A port kept in the home, so a restarted stack keeps its URLs.
kept_port() {
  local file="$home/$1.port" given="$2"
  if [ -n "$given" ]; then echo "$given" >"$file"; fi
  [ -s "$file" ] || free_port >"$file"
  cat "$file"
}

cmd_install() {
  local missing=()
  pg_bin >/dev/null || missing+=(postgresql)
  command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
  if [ "${#missing[@]}" -gt 0 ]; then
    log "installing ${missing[*]} (Debian packages; their system services are not started)"
    timeout 600 apt-get update -qq
    DEBIAN_FRONTEND=noninteractive timeout 900 apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
  "$here/scripts/bootstrap.sh"
  "$python" -c 'import airflow.providers.celery, psycopg2, redis' || die "the venv lacks the celery extra"
  log "installed: $(pg_bin), $(command -v redis-server), the celery extra"
}

ensure_secrets() {
  umask 077
  if [ ! -s "$home/secrets.env" ]; then
    "$python" -c 'import secrets
print(f"PG_PASSWORD={secrets.token_hex(16)}")
print(f"REDIS_PASSWORD={secrets.token_hex(16)}")' >"$home/secrets.env.tmp"
    mv "$home/secrets.env.tmp" "$home/secrets.env"
  fi
  umask 022
  # shellcheck disable=SC1091
  . "$home/secrets.env"
}

as_postgres() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

# ----------------------------------------------------------------------------------------------------------------
# PostgreSQL: a private cluster in $home/pg (data) with its socket in $home/pg-run.
# ----------------------------------------------------------------------------------------------------------------

pg_start() {
  local bin port="$1"
  bin="$(pg_bin)" || die "no PostgreSQL; run scripts/celery-stack.sh install"
  mkdir -p "$home/pg-run"
  if [ "$(id -u)" = 0 ]; then chown postgres "$home/pg-run"; fi
  if [ ! -s "$home/pg/PG_VERSION" ]; then
    mkdir -p "$home/pg"
    printf '%s\n' "$PG_PASSWORD" >"$home/pg-pwfile"
    if [ "$(id -u)" = 0 ]; then chown postgres "$home/pg" "$home/pg-pwfile"; fi
    chmod 700 "$home/pg"
    as_postgres "$bin/initdb" -D "$home/pg" -U airflow --pwfile="$home/pg-pwfile" --auth-host=scram-sha-256 \
      --auth-local=scram-sha-256 -E UTF8 >"$home/pg-initdb.log" 2>&1 || { cat "$home/pg-initdb.log" >&2; die "initdb failed"; }
    rm -f "$home/pg-pwfile"
  fi
  if as_postgres "$bin/pg_ctl" -D "$home/pg" status >/dev/null 2>&1; then
    log "PostgreSQL already running"
  else
    as_postgres "$bin/pg_ctl" -D "$home/pg" -l "$home/pg/server.log" -w -t "$start_timeout" \
      -o "-c listen_addresses=127.0.0.1 -p $port -k $home/pg-run -c max_connections=200" start >/dev/null \
      || { tail -n 20 "$home/pg/server.log" >&2; die "PostgreSQL did not start"; }
  fi
  if ! PGPASSWORD="$PG_PASSWORD" "$bin/psql" -h 127.0.0.1 -p "$port" -U airflow -d postgres -tAc \
    "select 1 from pg_database where datname = 'airflow'" | grep -q 1; then
    PGPASSWORD="$PG_PASSWORD" "$bin/createdb" -h 127.0.0.1 -p "$port" -U airflow airflow
  fi
  log "PostgreSQL on 127.0.0.1:$port (data $home/pg)"
}

pg_stop() {
  local bin
  bin="$(pg_bin)" || return 0
  [ -s "$home/pg/PG_VERSION" ] || return 0
  if as_postgres "$bin/pg_ctl" -D "$home/pg" status >/dev/null 2>&1; then
    as_postgres "$bin/pg_ctl" -D "$home/pg" -m fast -w -t 60 stop >/dev/null && log "stopped PostgreSQL"
  fi
}

# ----------------------------------------------------------------------------------------------------------------
# Redis: one private process, identified by its pid file ("<pid> <start time>").
# ----------------------------------------------------------------------------------------------------------------

start_time() { sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | awk '{print $20}' || true; }

redis_pid() {
  local pid started
  [ -f "$home/redis.pid" ] || return 1
  read -r pid started <"$home/redis.pid" || true
  [ -n "${pid:-}" ] && kill -0 "$pid" 2>/dev/null && [ "$(start_time "$pid")" = "${started:-}" ] || return 1
  echo "$pid"
}

redis_ping() {
  REDISCLI_AUTH="$REDIS_PASSWORD" timeout 5 redis-cli -h 127.0.0.1 -p "$1" ping 2>/dev/null | grep -q PONG
}

redis_start() {
  local port="$1"
  command -v redis-server >/dev/null 2>&1 || die "no redis-server; run scripts/celery-stack.sh install"
  if redis_pid >/dev/null; then
    log "Redis already running"
  else
    mkdir -p "$home/redis"
    umask 077
    printf 'bind 127.0.0.1\nport %s\nrequirepass %s\nsave ""\nappendonly no\ndir %s\nprotected-mode yes\n' \
      "$port" "$REDIS_PASSWORD" "$home/redis" >"$home/redis/redis.conf"
    umask 022
    setsid redis-server "$home/redis/redis.conf" </dev/null >"$home/redis/redis.log" 2>&1 &
    echo "$! $(start_time $!)" >"$home/redis.pid"
  fi
  local deadline=$((SECONDS + start_timeout))
  until redis_ping "$port"; do
    redis_pid >/dev/null || { tail -n 20 "$home/redis/redis.log" >&2; die "Redis exited during start-up"; }
    [ "$SECONDS" -lt "$deadline" ] || die "Redis did not answer within ${start_timeout}s"
    sleep 0.5
  done
  log "Redis on 127.0.0.1:$port"
}

redis_stop() {
  local pid waited=0
  pid="$(redis_pid)" || { rm -f "$home/redis.pid"; return 0; }
  kill -TERM "$pid" 2>/dev/null || true
  while kill -0 "$pid" 2>/dev/null; do
    [ "$waited" -lt 300 ] || { kill -KILL "$pid" 2>/dev/null || true; break; }
    sleep 0.1
    waited=$((waited + 1))
  done
  rm -f "$home/redis.pid"
  log "stopped Redis"
}

# ----------------------------------------------------------------------------------------------------------------

airflow_env() {
  local pg_port redis_port
  pg_port="$(cat "$home/pg.port")"
  redis_port="$(cat "$home/redis.port")"
  export AIRFLOW_LIVE_SQL_ALCHEMY_CONN="postgresql+psycopg2://airflow:$PG_PASSWORD@127.0.0.1:$pg_port/airflow"
  export AIRFLOW_LIVE_CELERY_BROKER_URL="redis://:$REDIS_PASSWORD@127.0.0.1:$redis_port/0"
}

cmd_start() {
  mkdir -p "$home"
  ensure_secrets
  local pg_port redis_port
  pg_port="$(kept_port pg "${CELERY_STACK_PG_PORT:-}")"
  redis_port="$(kept_port redis "${CELERY_STACK_REDIS_PORT:-}")"
  pg_start "$pg_port"
  redis_start "$redis_port"
  airflow_env
  "$here/scripts/airflow-live.sh" start
}

cmd_stop() {
  [ -d "$home" ] || { log "no stack in $home; nothing to stop"; return 0; }
  [ -s "$home/secrets.env" ] && ensure_secrets
  "$here/scripts/airflow-live.sh" stop || true
  redis_stop
  pg_stop
}

cmd_status() {
  [ -d "$home" ] || { echo "no stack in $home"; return 3; }
  ensure_secrets
  local bin rc=0
  if bin="$(pg_bin)" && as_postgres "$bin/pg_ctl" -D "$home/pg" status >/dev/null 2>&1; then
    echo "postgresql: running on 127.0.0.1:$(cat "$home/pg.port")"
  else
    echo "postgresql: not running"; rc=3
  fi
  if redis_pid >/dev/null; then echo "redis: running on 127.0.0.1:$(cat "$home/redis.port")"; else echo "redis: not running"; rc=3; fi
  "$here/scripts/airflow-live.sh" status || rc=$?
  return "$rc"
}

cmd_worker() {
  ensure_secrets
  airflow_env
  "$here/scripts/airflow-live.sh" "$1" "${2:-}"
}

case "${1:-}" in
  install) cmd_install ;;
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  stop-worker | start-worker | restart-scheduler) cmd_worker "$1" "${2:-}" ;;
  *) echo "usage: $0 {install|start|stop|status|stop-worker N|start-worker N|restart-scheduler}" >&2; exit 2 ;;
esac
