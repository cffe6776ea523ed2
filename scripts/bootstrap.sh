#!/usr/bin/env bash
# Create (or refresh) the project venv at .venv from the pinned constraints file.
# Idempotent and cached: uv's package cache lives outside the checkout, so a second run takes seconds.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
PYTHON="${PYTHON:-python3.11}"
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3

# A user install of uv lands in ~/.local/bin, which need not be on PATH: look there before installing it again.
export PATH="$HOME/.local/bin:$PATH"
if ! command -v uv >/dev/null 2>&1; then
  echo "bootstrap: installing uv (pinned) for the current user" >&2
  "$PYTHON" -m pip install --quiet --user "uv==0.13.8" || "$PYTHON" -m pip install --quiet "uv==0.13.8"
fi

stamp=".venv/.chatter-installed"
want="$(cat constraints.txt pyproject.toml | sha256sum | cut -c1-16)"
if [ -x .venv/bin/python ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
[ -x .venv/bin/python ] || uv venv --quiet -p "$PYTHON" .venv
uv pip install --quiet -p .venv/bin/python -c constraints.txt -e ".[test,celery]"
# An editable build leaves airflow_chatter.egg-info beside the package; with the checkout on sys.path Airflow
# would then see the distribution twice and register the plugin twice. The dist-info in the venv is the real one.
rm -rf airflow_chatter.egg-info
echo "$want" > "$stamp"
echo "bootstrap: .venv ready" >&2
