#!/usr/bin/env bash
# Start or stop the local services the tests and the demo use: a real Apache Kafka broker and the Cosmos DB
# emulator (with the project's compatibility layer), both on 127.0.0.1.
#
#   scripts/services.sh start   # installs what is missing (cached), starts both, prints an env file path
#   scripts/services.sh stop    # stops what this script started (by pid file)
#   scripts/services.sh env     # prints `export ...` lines for the running services
#
# When KAFKA_BOOTSTRAP_SERVERS / COSMOS_ENDPOINT (+ COSMOS_KEY) are set, that service is used as it is and nothing
# is started for it.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export CHATTER_STATE_DIR="${CHATTER_STATE_DIR:-$here/.cache/services}"
mkdir -p "$CHATTER_STATE_DIR"
envfile="$CHATTER_STATE_DIR/services.env"

write_env() {
  : > "$envfile"
  echo "export KAFKA_BOOTSTRAP_SERVERS=${KAFKA_BOOTSTRAP_SERVERS:-127.0.0.1:${KAFKA_PORT:-19092}}" >> "$envfile"
  if [ -n "${COSMOS_ENDPOINT:-}" ]; then
    echo "export COSMOS_ENDPOINT=$COSMOS_ENDPOINT" >> "$envfile"
    echo "export COSMOS_KEY=\${COSMOS_KEY}" >> "$envfile"
    [ -n "${COSMOS_VERIFY:-}" ] && echo "export COSMOS_VERIFY=$COSMOS_VERIFY" >> "$envfile"
  else
    "$here/scripts/cosmos-emulator.sh" env >> "$envfile"
  fi
}

case "${1:-}" in
  start)
    "$here/scripts/kafka.sh" start
    "$here/scripts/cosmos-emulator.sh" start
    write_env
    echo "services: environment in $envfile" >&2
    ;;
  stop)
    "$here/scripts/kafka.sh" stop || true
    "$here/scripts/cosmos-emulator.sh" stop || true
    ;;
  env)
    write_env
    cat "$envfile"
    ;;
  *)
    echo "usage: $0 {start|stop|env}" >&2
    exit 2
    ;;
esac
