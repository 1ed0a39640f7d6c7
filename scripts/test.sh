#!/usr/bin/env bash
# Sets up and runs the whole test suite (real embedded PostgreSQL + pgvector, fake Ollama server).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export LC_ALL=C.UTF-8 LANG=C.UTF-8
# pytest exits 5 when no test ran: that is a failure here, never a silent pass.
# Tests run in parallel, one process per core (at most 4); each process starts its own PostgreSQL.
exec .venv/bin/python -m pytest -p no:cacheprovider -n auto --maxprocesses 4 "$@"
