#!/usr/bin/env bash
# The emulator's other-SDK clients (tests/sdk/): a Java client of com.azure:azure-cosmos (Maven) and a Node client of
# @azure/cosmos (npm), built once into the cache and run by tests/integration/test_emulator_sdks.py.
#
#   scripts/sdk-clients.sh install      build both (each skipped, with the reason, when its toolchain is absent)
#   scripts/sdk-clients.sh where java   print the Java client's built directory (target/classes, target/lib)
#   scripts/sdk-clients.sh where node   print the Node client's node_modules directory
#   (where exits 3 with the reason on stderr when that client is not built)
#
# Each build lives in ${CHATTER_CACHE_DIR:-~/.cache/airflow-chatter}/sdk-<java|node>-<hash of its sources>, so an
# unchanged client is never rebuilt; Maven resolves into a local repository kept in the same cache (sdk-java-m2).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache_root="${CHATTER_CACHE_DIR:-$HOME/.cache/airflow-chatter}"
java_src="$here/tests/sdk/java"
node_src="$here/tests/sdk/node"
m2="$cache_root/sdk-java-m2"

log() { echo "sdk-clients: $*" >&2; }

java_dir() { echo "$cache_root/sdk-java-$(cd "$java_src" && find pom.xml src -type f | sort | xargs sha256sum | sha256sum | cut -c1-16)"; }
node_dir() { echo "$cache_root/sdk-node-$(cat "$node_src/package-lock.json" | sha256sum | cut -c1-16)"; }

java_missing() {
  command -v java >/dev/null 2>&1 || { echo "java not found on PATH (Java 17+ is needed for the Java SDK client)"; return 0; }
  command -v mvn >/dev/null 2>&1 || { echo "mvn not found on PATH (Maven builds the Java SDK client)"; return 0; }
  return 1
}

node_missing() {
  command -v npm >/dev/null 2>&1 || { echo "npm not found on PATH (Node 20 + npm run the Node SDK client)"; return 0; }
  return 1
}

install_java() {
  local dir reason
  if reason="$(java_missing)"; then log "Java client skipped: $reason"; return 0; fi
  dir="$(java_dir)"
  if [ -f "$dir/.installed" ]; then log "Java client already built in $dir"; return 0; fi
  local t0=$SECONDS tmp="$dir.tmp.$$"
  rm -rf "$tmp"; mkdir -p "$tmp"
  cp -r "$java_src/pom.xml" "$java_src/src" "$tmp/"
  log "building the Java client (azure-cosmos from azure-sdk-bom) into $dir"
  if ! mvn -B -q -Dmaven.repo.local="$m2" -f "$tmp/pom.xml" package >"$tmp/mvn.log" 2>&1; then
    tail -n 40 "$tmp/mvn.log" >&2 || true
    rm -rf "$tmp"
    log "maven could not build the Java client (see above)"; exit 1
  fi
  touch "$tmp/.installed"
  if ! mv -T "$tmp" "$dir" 2>/dev/null; then rm -rf "$tmp"; fi
  log "Java client built in $((SECONDS - t0))s"
}

install_node() {
  local dir reason
  if reason="$(node_missing)"; then log "Node client skipped: $reason"; return 0; fi
  dir="$(node_dir)"
  if [ -f "$dir/.installed" ]; then log "Node client already installed in $dir"; return 0; fi
  local t0=$SECONDS tmp="$dir.tmp.$$"
  rm -rf "$tmp"; mkdir -p "$tmp"
  cp "$node_src/package.json" "$node_src/package-lock.json" "$tmp/"
  log "npm ci (@azure/cosmos) into $dir"
  (cd "$tmp" && npm ci --no-audit --no-fund --loglevel=error >&2)
  touch "$tmp/.installed"
  if ! mv -T "$tmp" "$dir" 2>/dev/null; then rm -rf "$tmp"; fi
  log "Node client installed in $((SECONDS - t0))s"
}

cmd_where() {
  local dir reason
  case "${1:-}" in
    java) if reason="$(java_missing)"; then echo "$reason" >&2; exit 3; fi; dir="$(java_dir)" ;;
    node) if reason="$(node_missing)"; then echo "$reason" >&2; exit 3; fi; dir="$(node_dir)/node_modules" ;;
    *) echo "usage: $0 where {java|node}" >&2; exit 2 ;;
  esac
  [ -e "$dir" ] && [ -f "${dir%/node_modules}/.installed" ] || {
    echo "the $1 client is not built: run scripts/sdk-clients.sh install" >&2; exit 3; }
  echo "$dir"
}

case "${1:-}" in
  install)
    mkdir -p "$cache_root"
    exec 9>"$cache_root/.sdk-clients.lock"
    flock -w 900 9 || { log "could not lock $cache_root/.sdk-clients.lock"; exit 1; }
    install_java; install_node ;;
  where) cmd_where "${2:-}" ;;
  *) echo "usage: $0 {install|where java|where node}" >&2; exit 2 ;;
esac
