"""Prints the package's size by module, its classes over 300 lines and its functions/methods over 60 lines.

Usage: python scripts/code_stats.py [package_dir]   (default: factforge/ next to this script's repository)
A measuring aid for issue 17 (package layout); it reads the source with ast and imports nothing.
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
