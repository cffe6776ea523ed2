#!/usr/bin/env bash
# Regenerate constraints.txt from the project venv after it passed the suite (Airflow recommends installing
# against a constraints file; the official one is fetched by URL, which this project's machines cannot reach, so
# the project keeps its own, seeded from a known-good Airflow 3.3.2 / Python 3.11 set).
#
#   scripts/freeze-constraints.sh            # rewrite constraints.txt from .venv
#   scripts/freeze-constraints.sh --check    # exit 1 if .venv differs from constraints.txt
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
frozen="$(uv pip freeze -p .venv/bin/python | grep -v -i -E '^(-e |airflow-chatter)' | LC_ALL=C sort -f)"
header='# Pinned, known-good set for airflow-chatter: Airflow 3.3.2 on Python 3.11 (seeded from a known-good Airflow set, plus test tools).
# Regenerate with scripts/freeze-constraints.sh from a venv that passes the suite.'
if [ "${1:-}" = "--check" ]; then
  if diff <(grep -v '^#' constraints.txt | LC_ALL=C sort -f) <(echo "$frozen"); then
    echo "constraints.txt matches .venv"
  else
    echo "constraints.txt differs from .venv (lines above)" >&2
    exit 1
  fi
else
  printf '%s\n%s\n' "$header" "$frozen" > constraints.txt
  echo "constraints.txt: $(grep -vc '^#' constraints.txt) pins"
fi
