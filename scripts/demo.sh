#!/usr/bin/env bash
# README command 1: start Kafka and the Cosmos emulator on 127.0.0.1, write orders with their outbox documents,
# run the scheduled drain DAG end to end with dag.test(), print what happened, run it again (publishes nothing).
# Arguments are passed to `python scripts/demo.py` (--orders, --customers, --malformed, --no-services).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$here/scripts/bootstrap.sh"
exec "$here/.venv/bin/python" "$here/scripts/demo.py" "$@"
