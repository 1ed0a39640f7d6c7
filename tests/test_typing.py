"""The package ships ``py.typed``: its types must hold. mypy checks ``factforge`` with the settings of
pyproject.toml ([tool.mypy]) and any error fails the suite.

The mypy cache lives in the system's temp folder (one per checkout), so a rerun checks only what changed.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CACHE = Path(tempfile.gettempdir()) / f"factforge-mypy-{hashlib.md5(str(ROOT).encode()).hexdigest()[:12]}"


def mypy(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(CACHE), *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)


# One process runs both, this one first: the second then reads the cache the first wrote. Apart, on a cold cache,
# each checked the package on its own (127 s and 109 s at load ~10).
@pytest.mark.slow
@pytest.mark.xdist_group("mypy")
def test_the_package_type_checks() -> None:
    done = mypy("factforge")
    assert done.returncode == 0, f"mypy found errors in factforge:\n{done.stdout}{done.stderr}"


@pytest.mark.xdist_group("mypy")
def test_a_type_error_fails_the_check() -> None:
    """The check itself can fail: mypy, run the same way, reports a planted error."""
    done = mypy("-c", "from factforge.types import Fact\nfact: Fact = 'one'\n")
    assert done.returncode == 1
    assert 'Incompatible types in assignment (expression has type "str", variable has type "Fact")' in done.stdout
