#!/usr/bin/env bash
# Make sure Debian's headless-capable Chromium is installed (for the UI screenshot test); idempotent and cached:
# with chromium on PATH it only prints the path. Installing needs root (or sudo) and Debian's apt sources.
#
#   scripts/chromium.sh          install if missing, print the binary's path
set -euo pipefail

found() { command -v chromium || command -v chromium-browser || true; }

bin="$(found)"
if [ -z "$bin" ]; then
  sudo=""
  if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null || { echo "chromium.sh: chromium is missing and this is not root (no sudo)" >&2; exit 1; }
    sudo="sudo"
  fi
  echo "chromium.sh: installing Debian's chromium (apt-get)" >&2
  # One index refresh when the package is unknown to apt; otherwise install from the existing index.
  if ! apt-cache show chromium >/dev/null 2>&1; then
    $sudo apt-get update -qq >&2
  fi
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >&2 \
    || { $sudo apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >&2; }
  bin="$(found)"
fi
[ -n "$bin" ] || { echo "chromium.sh: chromium is still not on PATH" >&2; exit 1; }
echo "$bin"
