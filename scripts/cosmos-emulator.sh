#!/usr/bin/env bash
# Cosmos DB (NoSQL API) emulator for tests: @vercel/cosmosdb-server 1.0.1 plus the project's compatibility layer
# (emulator/, see emulator/README.md), over TLS with a certificate generated for 127.0.0.1.
#
#   scripts/cosmos-emulator.sh install   npm ci into a cache dir keyed by the lockfile hash (outside the checkout)
#   scripts/cosmos-emulator.sh start     start on 127.0.0.1:${COSMOS_EMULATOR_PORT:-8081}, wait until it answers
#   scripts/cosmos-emulator.sh stop      stop the server started from this state dir (by its pid file only)
#   scripts/cosmos-emulator.sh status    say whether it runs, and how to connect
#
# Environment:
#   COSMOS_ENDPOINT           set: a real account (or another emulator) is used; start/stop do nothing
#   COSMOS_EMULATOR_PORT      port on 127.0.0.1 (default 8081)
#   CHATTER_CACHE_DIR         npm install cache root (default $HOME/.cache/airflow-chatter)
#   CHATTER_STATE_DIR         pid/log/cert root (default <checkout>/.cache/services)
#   CHATTER_EMULATOR_COMPAT   0: start the vanilla 1.0.1 server without the compat layer (to prove tests need it)
#   COSMOS_EMULATOR_START_TIMEOUT  seconds to wait for readiness (default 30)
# Account-like switches (off by default; also settable at run time by POST /_chatter/config, see docs/emulator.md):
#   COSMOS_EMULATOR_LATENCY_MS       milliseconds added to every request (a real account's round trip)
#   COSMOS_EMULATOR_REQUEST_CHARGES  1: a modelled x-ms-request-charge on every response (else 1.0.1's constant 1)
#   COSMOS_EMULATOR_PROVISIONED_RU   RU/s per container; over it, 429 + x-ms-retry-after-ms, substatus 3200
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
checkout="$(cd "$here/.." && pwd)"
src="$checkout/emulator"
port="${COSMOS_EMULATOR_PORT:-8081}"
cache_root="${CHATTER_CACHE_DIR:-$HOME/.cache/airflow-chatter}"
state_root="${CHATTER_STATE_DIR:-$checkout/.cache/services}"
state="$state_root/cosmos-$port"
pidfile="$state/server.pid"
logfile="$state/server.log"
cert_dir="$state_root/cosmos-tls"
cert="$cert_dir/cert.pem"
key="$cert_dir/key.pem"
# The well-known Cosmos DB emulator key; the server accepts any base64 key.
emulator_key="C2y6yDjf5/R+ob0N8A7Cgv30VRDJIWEHLM+4QDU5DE2nQ9nDuVTqobD4b8mGGyPMbIZnqyMsEcaGQy67XIw/Jw=="
endpoint="https://127.0.0.1:$port/"

log() { echo "cosmos-emulator: $*" >&2; }

# Serialise install/start/stop of every emulator sharing this state dir (several test sessions may race).
with_lock() {
  mkdir -p "$state_root"
  exec 9>"$state_root/.cosmos-emulator-v2.lock"
  flock -w 300 9 || { log "could not take $state_root/.cosmos-emulator-v2.lock"; exit 1; }
}

lock_hash() { sha256sum "$src/package-lock.json" | cut -c1-16; }
install_dir() { echo "$cache_root/cosmos-emulator-$(lock_hash)"; }

cmd_install() {
  local dir
  dir="$(install_dir)"
  if [ -f "$dir/.installed" ]; then
    log "dependencies already installed in $dir"
  else
    command -v npm >/dev/null 2>&1 || { log "npm not found (Node 20 + npm are required)"; exit 1; }
    local tmp="$dir.tmp.$$"
    rm -rf "$tmp"
    mkdir -p "$tmp"
    cp "$src/package.json" "$src/package-lock.json" "$tmp/"
    log "npm ci into $dir"
    (cd "$tmp" && npm ci --no-audit --no-fund --loglevel=error >&2)
    touch "$tmp/.installed"
    # Another install may have finished first; either copy is complete.
    if ! mv -T "$tmp" "$dir" 2>/dev/null; then rm -rf "$tmp"; fi
  fi
  if [ ! -s "$cert" ] || [ ! -s "$key" ]; then
    command -v openssl >/dev/null 2>&1 || { log "openssl not found"; exit 1; }
    mkdir -p "$cert_dir"
    openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=127.0.0.1" \
      -addext "subjectAltName=IP:127.0.0.1,DNS:localhost" \
      -keyout "$key.tmp" -out "$cert.tmp" 2>/dev/null
    mv "$key.tmp" "$key"
    mv "$cert.tmp" "$cert"
    log "generated TLS certificate $cert"
  fi
}

running_pid() {
  [ -f "$pidfile" ] || return 1
  local pid
  pid="$(cat "$pidfile")"
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 1
  # The pid must still be our node server (not a recycled pid).
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q "emulator/server.js" || return 1
  echo "$pid"
}

answers() { curl -fsS --max-time 2 --cacert "$cert" "$endpoint" >/dev/null 2>&1; }

print_connection() {
  echo "COSMOS_ENDPOINT=$endpoint"
  echo "COSMOS_KEY=$emulator_key"
  echo "COSMOS_VERIFY=$cert"
}

cmd_start() {
  if [ -n "${COSMOS_ENDPOINT:-}" ]; then
    log "COSMOS_ENDPOINT is set ($COSMOS_ENDPOINT); not starting the emulator"
    return 0
  fi
  cmd_install
  mkdir -p "$state"
  if pid="$(running_pid)"; then
    log "already running (pid $pid)"
    echo "COSMOS_EMULATOR_STARTED=0"
    print_connection
    return 0
  fi
  local dir
  dir="$(install_dir)"
  # server.js resolves @vercel/cosmosdb-server from the cached node_modules.
  NODE_PATH="$dir/node_modules" nohup node "$src/server.js" --port "$port" --host 127.0.0.1 \
    --cert "$cert" --key "$key" >"$logfile" 2>&1 </dev/null 9>&- &
  echo $! >"$pidfile"
  local deadline=$((SECONDS + ${COSMOS_EMULATOR_START_TIMEOUT:-30}))
  until answers; do
    if ! kill -0 "$(cat "$pidfile")" 2>/dev/null; then
      log "server exited during start; log follows"
      cat "$logfile" >&2
      rm -f "$pidfile"
      exit 1
    fi
    if [ "$SECONDS" -ge "$deadline" ]; then
      log "not ready after ${COSMOS_EMULATOR_START_TIMEOUT:-30}s; see $logfile"
      exit 1
    fi
    sleep 0.2
  done
  log "$(tail -n 1 "$logfile")"
  echo "COSMOS_EMULATOR_STARTED=1"
  print_connection
}

cmd_stop() {
  if [ -n "${COSMOS_ENDPOINT:-}" ]; then
    log "COSMOS_ENDPOINT is set; nothing to stop"
    return 0
  fi
  local pid
  if pid="$(running_pid)"; then
    kill "$pid"
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
    log "stopped (pid $pid)"
  else
    log "not running"
  fi
  rm -f "$pidfile"
}

cmd_status() {
  if [ -n "${COSMOS_ENDPOINT:-}" ]; then
    echo "external: $COSMOS_ENDPOINT"
    return 0
  fi
  local pid
  if pid="$(running_pid)" && answers; then
    echo "running (pid $pid)"
    print_connection
  else
    echo "not running"
    return 3
  fi
}

case "${1:-}" in
  install) with_lock; cmd_install ;;
  start) with_lock; cmd_start ;;
  stop) with_lock; cmd_stop ;;
  status) cmd_status ;;
  *) echo "usage: $0 {install|start|stop|status}" >&2; exit 2 ;;
esac
