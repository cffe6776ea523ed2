#!/usr/bin/env bash
# Build the airflow-chatter distribution (an sdist, and the wheel built from it) with uv, into dist/ or $1, and
# print the wheel's path. Install that wheel into every Airflow component's environment (docs/getting-started.md):
#
#   scripts/build-wheel.sh                    # -> dist/airflow_chatter-<version>-py3-none-any.whl
#   pip install dist/airflow_chatter-*.whl -c constraints.txt
#
# setuptools leaves airflow_chatter.egg-info beside the package; it is removed again (unless it was there before),
# because with the checkout on sys.path Airflow would see the distribution twice and register the plugin twice.
# Offline works once uv's cache holds setuptools (scripts/bootstrap.sh puts it there): UV_OFFLINE=1.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
export PATH="$HOME/.local/bin:$PATH"
command -v uv >/dev/null 2>&1 || { echo "build-wheel: uv not found (scripts/bootstrap.sh installs it)" >&2; exit 1; }
out="$(mkdir -p "${1:-dist}" && cd "${1:-dist}" && pwd)"
had_egg_info=0
[ -e airflow_chatter.egg-info ] && had_egg_info=1
cleanup() { [ "$had_egg_info" = 1 ] || rm -rf airflow_chatter.egg-info; }
trap cleanup EXIT
version="$(sed -n 's/^version = "\(.*\)"$/\1/p' pyproject.toml | head -n 1)"
rm -f "$out/airflow_chatter-$version"-*.whl "$out/airflow_chatter-$version.tar.gz"
uv build --quiet -o "$out" >&2
ls "$out/airflow_chatter-$version"-*.whl
