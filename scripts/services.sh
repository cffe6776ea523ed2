#!/usr/bin/env bash
# Start or stop the local services the demo uses: a real Apache Kafka broker and the Cosmos DB emulator (with
# the project's compatibility layer), both on 127.0.0.1. Installs what is missing first (cached).
#
#   scripts/services.sh start   # start both; writes their connection settings to $CHATTER_STATE_DIR/services.env
#   scripts/services.sh stop    # stop both (each by its own pid file)
#
# When KAFKA_BOOTSTRAP_SERVERS / COSMOS_ENDPOINT (+ COSMOS_KEY) are set, that service is used as it is and nothing
# is started for it. (The test suite's fixtures start and stop the same services by themselves.)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export CHATTER_STATE_DIR="${CHATTER_STATE_DIR:-$here/.cache/services}"
mkdir -p "$CHATTER_STATE_DIR"
envfile="$CHATTER_STATE_DIR/services.env"

case "${1:-}" in
  start)
    kafka="$("$here/scripts/kafka.sh" start | tail -n 1)"
    {
      echo "export KAFKA_BOOTSTRAP_SERVERS=${kafka}"
      if [ -n "${COSMOS_ENDPOINT:-}" ]; then
        echo "export COSMOS_ENDPOINT=${COSMOS_ENDPOINT}"
        [ -n "${COSMOS_VERIFY:-}" ] && echo "export COSMOS_VERIFY=${COSMOS_VERIFY}"
        # COSMOS_KEY stays in the caller's environment; it is never written to disk.
      else
        "$here/scripts/cosmos-emulator.sh" start | grep -E '^COSMOS_(ENDPOINT|KEY|VERIFY)=' | sed 's/^/export /'
      fi
    } > "$envfile"
    chmod 600 "$envfile"
    echo "services: started; connection settings in $envfile" >&2
    ;;
  stop)
    "$here/scripts/kafka.sh" stop || true
    "$here/scripts/cosmos-emulator.sh" stop || true
    ;;
  *)
    echo "usage: $0 {start|stop}" >&2
    exit 2
    ;;
esac
