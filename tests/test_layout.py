"""The package's import directions (issue 17): core <- rules <- models, core <- storage, front doors on top.

* core (``errors``, ``types``, ``settings``, ``inputs``, ``jsonout``) imports nothing else of factforge;
* ``factforge.rules`` imports the core only (pure: no database, no network);
* ``factforge.models`` imports ``rules`` and the core;
* ``factforge.storage`` imports the core only;
* only the front doors (the library and its write path, ingest, the CLI, the server, the worker) compose them.

Every import in the package is read with ``ast`` (inside functions and ``TYPE_CHECKING`` blocks too), so a lazy
import counts like any other. A new top-level module must be placed in one of the layers below.
"""

from __future__ import annotations

import ast
from functools import lru_cache
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "factforge"

CORE = {"factforge.errors", "factforge.types", "factforge.settings", "factforge.inputs", "factforge.jsonout"}
FRONT_DOORS = {
    "factforge", "factforge.__main__", "factforge.memory", "factforge.ingest", "factforge.cli",
    "factforge.cli_service", "factforge.api", "factforge.service", "factforge.mcp_server", "factforge.worker",
    "factforge.streams", "factforge.writing", "factforge.draining", "factforge.redaction",
    "factforge.background",
}
WINGS = ("rules", "models", "storage")
# layer -> the layers it may import (besides itself)
ALLOWED = {
    "core": {"core"},
    "rules": {"core", "rules"},
    "models": {"core", "rules", "models"},
    "storage": {"core", "storage"},
    "front": {"core", "rules", "models", "storage", "front"},
}

# Arrows allowed against the directions. Stage 2 of issue 17 removed the last three (storage applies the
# supersession decisions and canonical spellings the rules give it; the storage half of embed.py moved to
# storage/embeddings.py). Keep it empty: test_allowances_are_still_needed fails on an unused entry.
ALLOWANCES: set[tuple[str, str]] = set()


def layer(module: str) -> str:
    if module in CORE:
        return "core"
    if module in FRONT_DOORS:
        return "front"
    parts = module.split(".")
    if len(parts) >= 2 and parts[1] in WINGS:
        return parts[1]
    raise AssertionError(f"{module} belongs to no layer: place it in core, a wing or the front doors (tests/test_layout.py)")


def module_name(path: Path, package: Path) -> str:
    parts = list(path.relative_to(package.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


# Kept per source text: each test reads the package again (and test_a_new_wrong_arrow_fails a copy of it, the same
# text but for six files), and parsing it is most of the file's time (3.4 -> 0.6 s of CPU in one process).
@lru_cache(maxsize=None)
def imports(source: str, module: str, is_package: bool, known: frozenset[str]) -> frozenset[str]:
    """The factforge modules ``source`` (the module ``module``) imports, as absolute names."""
    found: set[str] = set()
    here = module.split(".") if is_package else module.split(".")[:-1]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "factforge"}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "factforge":
                continue
            # `from pkg import name`: name is a module when one exists by that name, else an attribute of pkg
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                found.add(sub if sub in known else target)
    return frozenset(found)


def package_modules(package: Path) -> dict[str, tuple[Path, bool]]:
    modules = {}
    for path in sorted(package.rglob("*.py")):
        if "_bundled" in path.parts:
            continue
        modules[module_name(path, package)] = (path, path.name == "__init__.py")
    return modules


def arrows(package: Path) -> set[tuple[str, str]]:
    modules = package_modules(package)
    known = frozenset(modules)
    found = set()
    for name, (path, is_package) in modules.items():
        for target in imports(path.read_text(encoding="utf-8"), name, is_package, known):
            if target != name:
                found.add((name, target))
    return found


def wrong_arrows(package: Path) -> set[tuple[str, str]]:
    return {(a, b) for a, b in arrows(package) if layer(b) not in ALLOWED[layer(a)]}


def test_imports_follow_the_directions():
    wrong = wrong_arrows(PACKAGE) - ALLOWANCES
    assert wrong == set(), "imports against the directions (core <- rules <- models, core <- storage):\n" + \
        "\n".join(f"  {a} -> {b}" for a, b in sorted(wrong))


def test_allowances_are_still_needed():
    assert ALLOWANCES - wrong_arrows(PACKAGE) == set(), "an allowance is no longer used: remove it from ALLOWANCES"


def test_every_module_has_a_layer():
    for name in package_modules(PACKAGE):
        layer(name)


def test_a_new_wrong_arrow_fails(tmp_path):
    """The check itself can fail: a copy of the package with one new wrong arrow per kind is caught."""
    copy = tmp_path / "factforge"
    for name, (path, _) in package_modules(PACKAGE).items():
        target = copy / path.relative_to(PACKAGE)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
    assert wrong_arrows(copy) == wrong_arrows(PACKAGE)
    planted = {
        "errors.py": "from .rules import gatekeeper\n",  # core -> rules
        "rules/segment.py": "def f():\n    from ..storage.db import conninfo\n",  # rules -> storage, lazily
        "rules/names.py": "from factforge.models.llm import OllamaLLM\n",  # rules -> models, absolute
        "models/validate.py": "from ..memory import Memory\n",  # models -> front door
        "storage/keys.py": "from ..rules.gatekeeper import Gatekeeper\n",  # storage -> rules
        "storage/db.py": "from factforge import cli\n",  # storage -> front door, `from package import module`
    }
    for rel, line in planted.items():
        with open(copy / rel, "a", encoding="utf-8") as fh:
            fh.write(line)
    new = wrong_arrows(copy) - wrong_arrows(PACKAGE)
    assert new == {
        ("factforge.errors", "factforge.rules.gatekeeper"),
        ("factforge.rules.segment", "factforge.storage.db"),
        ("factforge.rules.names", "factforge.models.llm"),
        ("factforge.models.validate", "factforge.memory"),
        ("factforge.storage.keys", "factforge.rules.gatekeeper"),
        ("factforge.storage.db", "factforge.cli"),
    }
