#!/usr/bin/env bash
# Sets up factforge and runs its main job on the embedded default database: ingest the bundled
# example team chat, list the stored facts, search them.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export LC_ALL=C.UTF-8 LANG=C.UTF-8
# A data folder of the demo's own, so it never mixes with a real memory in the user's data dir.
export FACTFORGE_HOME=${FACTFORGE_HOME:-$PWD/.factforge}
.venv/bin/factforge demo "$@"
# The factforge command is in .venv, and this memory is in FACTFORGE_HOME: say how to reach both.
cat <<NEXT

To explore this memory with the factforge command:
  source $PWD/.venv/bin/activate
  export FACTFORGE_HOME=$FACTFORGE_HOME
  factforge facts --agent review-bot --team platform
  factforge search "GitHub Actions" --agent review-bot --team platform
  factforge db status    # its server stops by itself after 30 idle minutes; \`factforge db stop\` stops it now
NEXT
