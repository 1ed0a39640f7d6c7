"""A real, non-editable install: build the wheel, install it in a fresh virtualenv, run the commands a new
user runs first. The pattern library, the migrations and the example chat must come inside the wheel."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# What a fresh clone has, minus what the wheel must not need (tests, benchmarks) and local state.
SKIP = shutil.ignore_patterns(".venv", ".git", "build", "dist", "*.egg-info", "__pycache__", ".factforge", "tests",
                              "bench", ".pytest_cache", ".hypothesis")


@pytest.mark.slow
def test_wheel_installs_and_runs_outside_the_checkout(tmp_path: Path, db_url: str) -> None:
    src = tmp_path / "src"
    shutil.copytree(ROOT, src, ignore=SKIP)  # build from a copy: setuptools writes build/ into the tree
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path / "dist"),
                            str(src)], capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    (wheel,) = (tmp_path / "dist").glob("factforge-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for top in ("patterns", "migrations", "examples"):
        shipped = {p.relative_to(ROOT / top).as_posix() for p in (ROOT / top).rglob("*")
                   if p.is_file() and "__pycache__" not in p.parts}
        assert shipped and {n for n in shipped if f"factforge/_bundled/{top}/{n}" not in names} == set()

    # A fresh venv with the wheel alone in it; its dependencies are borrowed from the test venv (a path line,
    # so the test venv's editable factforge finder is not loaded) to keep the test offline and fast.
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    installed = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "-q",
                                str(wheel)], capture_output=True, text=True, timeout=300)
    assert installed.returncode == 0, installed.stderr
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    (site / "zz_test_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")

    env = {k: v for k, v in os.environ.items() if not k.startswith(("FACTFORGE_", "PYTHON"))}
    env.update(FACTFORGE_HOME=str(tmp_path / "home"), FACTFORGE_LLM="off", FACTFORGE_EMBEDDER="none",
               FACTFORGE_DATABASE_URL=db_url)

    def run(*args: str) -> str:
        proc = subprocess.run([str(venv / "bin" / "factforge"), *args], capture_output=True, text=True, env=env,
                              cwd=tmp_path, timeout=300)
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
        return proc.stdout

    where = subprocess.run([str(python), "-c", "import factforge; print(factforge.__file__)"], capture_output=True,
                           text=True, env=env, cwd=tmp_path, check=True).stdout
    assert where.startswith(str(venv))  # the installed copy, not the checkout
    assert "rules load and pass their examples" in run("patterns", "check")
    assert "User prefers dark mode over light mode" in run("extract", "--no-llm", "I prefer dark mode over light mode")
    assert "schema already up to date" in run("db", "upgrade")  # the migrations are found
    assert "facts visible to agent 'review-bot'" in run("demo")  # the example chat is found
    assert "facts (distinct, current)" in run("stats")
