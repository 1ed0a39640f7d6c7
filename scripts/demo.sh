#!/usr/bin/env bash
# Sets up factforge and runs its main job on the embedded default database: ingest the bundled
# example team chat, list the stored facts, search them.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export LC_ALL=C.UTF-8 LANG=C.UTF-8
# A data folder of the demo's own, so it never mixes with a real memory in the user's data dir.
export FACTFORGE_HOME=${FACTFORGE_HOME:-$PWD/.factforge}
exec .venv/bin/factforge demo "$@"
