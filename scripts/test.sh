#!/usr/bin/env bash
# Sets up and runs the whole test suite (real embedded PostgreSQL + pgvector, fake Ollama server).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export LC_ALL=C.UTF-8 LANG=C.UTF-8
# pytest exits 5 when no test ran: that is a failure here, never a silent pass.
# Tests run in parallel, one process per core (at most 4); each process starts its own PostgreSQL. Tests are dealt
# out one at a time as a process runs low (loadgroup: tests marked with one xdist_group go to one process together),
# long ones first (marked slow, see tests/conftest.py), so no process is left working alone at the end.
# Temporary folders of this run's own: any pytest run started meanwhile on the machine resets /tmp/pytest-of-$USER to
# mode 0700, and the embedded servers that tests start there (run as another system user) then cannot reach their
# data folders ("pg_ctl: could not access directory ...: Permission denied").
base="$(mktemp -d "${TMPDIR:-/tmp}/factforge-tests.XXXXXX")"
trap 'rm -rf "$base"' EXIT
.venv/bin/python -m pytest -p no:cacheprovider -n auto --maxprocesses 4 --dist loadgroup --basetemp "$base/run" "$@"
