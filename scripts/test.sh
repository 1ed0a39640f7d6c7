#!/usr/bin/env bash
# Sets up and runs the whole test suite (real embedded PostgreSQL + pgvector, fake Ollama server).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export LC_ALL=C.UTF-8 LANG=C.UTF-8
# pytest exits 5 when no test ran: that is a failure here, never a silent pass.
# Tests run in parallel, one process per core (at most 4); each process starts its own PostgreSQL. Work stealing: a
# process that runs out of tests takes half of another's queue, so long tests (marked slow, dealt out first, see
# tests/conftest.py) never leave one process working alone at the end while the other waits.
# Temporary folders of this run's own: any pytest run started meanwhile on the machine resets /tmp/pytest-of-$USER to
# mode 0700, and the embedded servers that tests start there (run as another system user) then cannot reach their
# data folders ("pg_ctl: could not access directory ...: Permission denied").
base="$(mktemp -d "${TMPDIR:-/tmp}/factforge-tests.XXXXXX")"
trap 'rm -rf "$base"' EXIT
.venv/bin/python -m pytest -p no:cacheprovider -n auto --maxprocesses 4 --dist worksteal --basetemp "$base/run" "$@"
