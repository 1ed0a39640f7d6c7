"""Prints the package's size by module, its classes over 300 lines and its functions/methods over 60 lines.

Usage: python scripts/code_stats.py [package_dir]   (default: factforge/ next to this script's repository)
A measuring aid for issue 17 (package layout); it reads the source with ast and imports nothing.

Issue 17, before -> after (stage 2, with issue 19 merged; then stage 3: rule-file shapes, one rule loader,
CLI through Memory, long functions split):
  modules            36 modules, 11,638 lines -> 55 modules, 12,530 lines -> 56 modules, 12,717 lines (rules/
                     schema.py: every rule file's shape; the loaders lost ~450 lines of hand-written checks)
                     -> 56 modules, 13,073 lines after issues 13, 14 and 19 merged (stage 4)
  largest class      Store 986 lines, Memory 686 -> Memory 307 -> Memory 319 (check_embedder, keys and
                     reset_embeddings, so the CLI goes through it; Store 238; no other class over 300)
                     -> Memory 300, Gatekeeper 281 (the default LLM/embedder and the gate's name reading
                     moved to module functions after issue 14 had grown Gatekeeper to 335)
  largest functions  search.search 128, api.create_app 128, Store.forget 127 -> search.search 129,
                     api.create_app 128 -> gatekeeper._build 60 (none over 60)
  over 60 lines      16 functions -> 11 -> 0
  rule-file checks   problems.add in the rule and data-file loaders 183 -> 38, isinstance 118 -> 2 (the rest
                     is what a shape cannot say: regexes, examples, cross-references)
  loader call sites  from_dir outside rules/load.py 10 -> 1 (rulefile.check_bundled's uncached fresh copy)
  duplicates         `duplicates --repo factforge --most 200`: 18 pairs -> 14 -> 13
  mypy               71 errors in 18 files -> 0 (tests/test_typing.py, settings in pyproject.toml)
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

CLASS_LIMIT = 300
FUNCTION_LIMIT = 60


def span(node: ast.AST) -> int:
    return node.end_lineno - node.lineno + 1  # type: ignore[attr-defined]


def main() -> None:
    root = Path(__file__).resolve().parents[1]
    package = Path(sys.argv[1]) if len(sys.argv) > 1 else root / "factforge"
    modules: list[tuple[int, str]] = []
    classes: list[tuple[int, str]] = []
    functions: list[tuple[int, str]] = []
    for path in sorted(package.rglob("*.py")):
        name = path.relative_to(package.parent).as_posix()
        text = path.read_text(encoding="utf-8")
        modules.append((len(text.splitlines()), name))
        tree = ast.parse(text)
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                classes.append((span(node), f"{name}:{node.lineno} class {node.name}"))
                for item in node.body:
                    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        functions.append((span(item), f"{name}:{item.lineno} {node.name}.{item.name}"))
        for item in tree.body:
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                functions.append((span(item), f"{name}:{item.lineno} {item.name}"))
    print(f"modules by lines ({len(modules)} modules, {sum(n for n, _ in modules)} lines):")
    for lines, name in sorted(modules, reverse=True):
        print(f"  {lines:6d}  {name}")
    print(f"classes over {CLASS_LIMIT} lines (largest: {max(classes)[1]}, {max(classes)[0]} lines):")
    for lines, name in sorted(classes, reverse=True):
        if lines > CLASS_LIMIT:
            print(f"  {lines:6d}  {name}")
    print(f"functions and methods over {FUNCTION_LIMIT} lines (largest: {max(functions)[1]}, {max(functions)[0]} lines):")
    for lines, name in sorted(functions, reverse=True):
        if lines > FUNCTION_LIMIT:
            print(f"  {lines:6d}  {name}")


if __name__ == "__main__":
    main()
