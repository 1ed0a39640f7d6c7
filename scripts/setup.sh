#!/usr/bin/env bash
# Creates .venv (if missing) and installs factforge with its test extras. Idempotent; sourced by the others.
set -euo pipefail
cd "$(dirname "$0")/.."
export LC_ALL=C.UTF-8 LANG=C.UTF-8

die() { echo "factforge setup: $*" >&2; exit 1; }

# A Python >= 3.11: $PYTHON if set, else the first of these that is new enough.
find_python() {
    local candidate
    for candidate in ${PYTHON:-} python3.13 python3.12 python3.11 python3; do
        if command -v "$candidate" >/dev/null 2>&1 &&
            "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
            echo "$candidate"
            return 0
        fi
    done
    return 1
}

if [ ! -x .venv/bin/python ]; then
    PY=$(find_python) || die "Python >= 3.11 is needed (set PYTHON=/path/to/python3.11)"
    if ! "$PY" -m venv .venv >/dev/null 2>&1; then
        rm -rf .venv
        # Debian/Ubuntu ship venv (ensurepip) separately.
        if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
            ver=$("$PY" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
            apt-get update -qq >/dev/null && { apt-get install -y -qq "python$ver-venv" >/dev/null 2>&1 ||
                apt-get install -y -qq python3-venv >/dev/null; } || die "could not install python3-venv"
            "$PY" -m venv .venv || { rm -rf .venv; die "$PY -m venv failed"; }
        else
            die "$PY -m venv failed: install the venv module (Debian/Ubuntu: apt-get install python3-venv)"
        fi
    fi
fi
stamp=.venv/.factforge-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
    # pip's and setuptools' notices (the "Editable installation" box, index warnings) go to a log shown only
    # when the install fails: a first setup prints nothing but errors.
    log=.venv/pip-install.log
    if ! { .venv/bin/python -m pip install -q --upgrade pip && .venv/bin/python -m pip install -q -e ".[test]"; } \
        >"$log" 2>&1; then
        cat "$log" >&2
        die "installing factforge into .venv failed (the log above is in $log)"
    fi
    touch "$stamp"
fi
