#!/usr/bin/env bash
# Sets up and runs the whole test suite (real embedded PostgreSQL + pgvector, fake Ollama server).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export LC_ALL=C.UTF-8 LANG=C.UTF-8
# Temporary folders of this checkout's runs only: pytest keeps the last 3 runs under its temp root and deletes
# older ones, which would pull the data folders from under another checkout's (or user's) running tests.
export PYTEST_DEBUG_TEMPROOT=${PYTEST_DEBUG_TEMPROOT:-/tmp/factforge-tests-$(pwd | cksum | cut -d' ' -f1)}
mkdir -p "$PYTEST_DEBUG_TEMPROOT"
# pytest exits 5 when no test ran: that is a failure here, never a silent pass.
# Tests run in parallel, one process per core (at most 4); each process starts its own PostgreSQL.
exec .venv/bin/python -m pytest -p no:cacheprovider -n auto --maxprocesses 4 "$@"
