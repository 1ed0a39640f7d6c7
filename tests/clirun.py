"""The ``factforge`` command run in the test's own process, through its real entry point ``factforge.cli.main``.

A ``python -m factforge`` subprocess costs 1.3-2 s of interpreter start-up and imports; most CLI tests check what a
command does and prints, not the process boundary. What a fresh process would not carry over from an earlier call
is reset around each one: the environment (``get_settings`` reads it once and caches it), the rule-file checker's
full-check switch (``patterns check`` turns it on), the root logger's handlers, and stdin/stdout/stderr. Rule sets
stay cached per patterns folder, as in any long-running process: a test that needs other rules writes another folder. ``SystemExit`` becomes the exit code as the interpreter would make it.

Anything else a command raises is not caught: it fails the test with its traceback, as a traceback on a real
command's stderr fails the tests that check for one. Tests of what only a process shows (the console script, a
terminal, ``db psql``'s exec, a server killed under a running command) keep a real subprocess.
"""

from __future__ import annotations

import io
import logging
import os
import sys
from collections.abc import Mapping
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass


@dataclass(frozen=True)
class Result:
    """What ``subprocess.run(..., capture_output=True, text=True)`` gives, for the parts the tests read."""

    returncode: int
    stdout: str
    stderr: str


def _reset_settings() -> None:
    """Forget the settings one command read from the environment, as the next command's fresh process would."""
    from factforge.settings import get_settings

    get_settings.cache_clear()


def run_cli(*args: str, env: Mapping[str, str] | None = None, stdin: str | None = None,
            environ: Mapping[str, str] | None = None) -> Result:
    """Run ``factforge ARGS`` with ``env`` added to this process's environment (or with exactly ``environ``),
    ``stdin`` as its input (empty if None, as a closed pipe), and its output captured."""
    from factforge import cli
    from factforge.rules import rulefile

    saved_env = dict(os.environ)
    root = logging.getLogger()
    saved_logging = (root.level, list(root.handlers))
    trusted = rulefile.trusts_shipped()
    out, err = io.StringIO(), io.StringIO()
    saved_stdin = sys.stdin
    os.environ.clear()
    os.environ.update(saved_env if environ is None else environ)
    os.environ.update(env or {})
    _reset_settings()
    sys.stdin = io.StringIO(stdin or "")
    try:
        with redirect_stdout(out), redirect_stderr(err):
            try:
                code: object = cli.main(list(args))
            except SystemExit as exc:
                code = exc.code
            if code is None:
                code = 0
            elif not isinstance(code, int):  # SystemExit("message"): the interpreter prints it, exit code 1
                print(code, file=sys.stderr)
                code = 1
    finally:
        sys.stdin = saved_stdin
        os.environ.clear()
        os.environ.update(saved_env)
        _reset_settings()
        if rulefile.trusts_shipped() != trusted:
            rulefile.full_speed_checks(not trusted)
        root.setLevel(saved_logging[0])
        root.handlers[:] = saved_logging[1]
    return Result(code, out.getvalue(), err.getvalue())
