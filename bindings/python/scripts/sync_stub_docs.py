"""Writes the docstrings of the built native module into its type stub.

The native module's docstrings are the Rust doc comments of
``bindings/python/src`` (pyo3 copies them); the stub ``_native.pyi`` repeats
them for editors and type checkers, which never import the module. After
changing a doc comment, build and install the package (``pip install
./bindings/python``), then run::

    python bindings/python/scripts/sync_stub_docs.py

with that interpreter: every docstring of a class, function, method or
property the stub declares is replaced by the module's. The test
``tests/test_docs.py`` fails while the two differ. Only docstrings change;
the declarations stay as they are.
"""

from __future__ import annotations

import ast
import inspect
import sys
from pathlib import Path
from typing import Any, List, Tuple

from krabka_coordination import _native

STUB = Path(__file__).resolve().parents[1] / "python" / "krabka_coordination" / "_native.pyi"


def _runtime_doc(obj: Any) -> str:
    if isinstance(obj, (staticmethod, classmethod)):
        obj = obj.__func__
    doc = inspect.getdoc(obj)
    if not doc:
        raise SystemExit(f"{obj!r} has no docstring in the module: document it in the Rust source first")
    return doc


def _render(doc: str, indent: str) -> str:
    text = doc.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    if text.endswith('"'):
        text = text[:-1] + '\\"'
    lines = text.split("\n")
    body = "\n".join([lines[0]] + [(indent + line) if line else "" for line in lines[1:]])
    return f'{indent}"""{body}"""\n'


def main() -> int:
    source = STUB.read_text(encoding="utf-8")
    lines = source.splitlines(keepends=True)
    tree = ast.parse(source)
    edits: List[Tuple[int, int, str]] = []  # (first line, last line, text), 1-based

    def visit(node: ast.AST, owner: Any) -> None:
        body = getattr(node, "body", [])
        if not (body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)):
            raise SystemExit(f"{STUB}:{getattr(node, 'lineno', '?')}: no docstring to replace")
        first = body[0]
        assert first.end_lineno is not None
        edits.append((first.lineno, first.end_lineno, _render(_runtime_doc(owner), " " * first.col_offset)))

    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            cls = getattr(_native, node.name)
            visit(node, cls)
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, ast.FunctionDef) and not item.name.startswith("__"):
                        visit(item, inspect.getattr_static(cls, item.name))

    for first, last, text in sorted(edits, reverse=True):
        lines[first - 1 : last] = [text]
    updated = "".join(lines)
    ast.parse(updated)  # still a valid stub
    if updated != source:
        STUB.write_text(updated, encoding="utf-8")
        print(f"{STUB}: {len(edits)} docstrings written from the module")
    else:
        print(f"{STUB}: {len(edits)} docstrings already the module's")
    return 0


if __name__ == "__main__":
    sys.exit(main())
