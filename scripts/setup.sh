#!/usr/bin/env bash
# Creates .venv (if missing) and installs factforge with its test extras. Idempotent; sourced by the others.
set -euo pipefail
cd "$(dirname "$0")/.."
export LC_ALL=C.UTF-8 LANG=C.UTF-8
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
fi
stamp=.venv/.factforge-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
    .venv/bin/python -m pip install -q --upgrade pip >/dev/null
    .venv/bin/python -m pip install -q -e ".[test]"
    touch "$stamp"
fi
