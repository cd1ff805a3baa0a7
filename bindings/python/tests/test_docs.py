"""The API documentation of the installed package: ``help()`` renders every
public name with its docstring, and the native module's docstrings are the
ones its type stub (``_native.pyi``, shipped in the wheel) states, name by
name, so an IDE reading the stub and ``help()`` reading the module say the
same thing."""

from __future__ import annotations

import ast
import inspect
import pydoc
from pathlib import Path
from typing import Any, Iterator, List, Optional, Tuple

import pytest

import krabka_coordination as kc
from krabka_coordination import _native

STUB = Path(_native.__file__).with_name("_native.pyi")

# Names of ``__all__`` that are data or type aliases, not classes or
# functions: they carry no docstring of their own.
NOT_DOCUMENTABLE = {
    "NO_EPOCH",
    "EventKind",
    "ChangeKind",
    "KafkaSettings",
    "OAuthTokenProvider",
    "EventCallback",
    "LeadWork",
    "AsyncLeadWork",
}


def _stub_entries() -> Iterator[Tuple[str, Optional[str], Any]]:
    """Every class, function, method and property the stub declares (dunder
    methods aside: their meaning is Python's), as (dotted name, the stub's
    docstring, the runtime object)."""
    tree = ast.parse(STUB.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            owner = getattr(_native, node.name)
            yield node.name, ast.get_docstring(node), owner
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, ast.FunctionDef) and not item.name.startswith("__"):
                        yield f"{node.name}.{item.name}", ast.get_docstring(item), inspect.getattr_static(owner, item.name)


def test_the_stub_is_shipped_next_to_the_module() -> None:
    assert STUB.is_file(), STUB
    assert (STUB.parent / "py.typed").is_file()


def test_every_name_of_the_stub_has_the_stubs_docstring_in_the_module() -> None:
    checked = 0
    problems: List[str] = []
    for name, stub_doc, obj in _stub_entries():
        checked += 1
        runtime_doc = inspect.getdoc(obj.__func__ if isinstance(obj, (staticmethod, classmethod)) else obj)
        if not stub_doc:
            problems.append(f"{name}: no docstring in {STUB.name}")
        elif not runtime_doc:
            problems.append(f"{name}: no docstring in the module")
        elif inspect.cleandoc(stub_doc) != inspect.cleandoc(runtime_doc):
            problems.append(f"{name}: the module says {runtime_doc!r}, the stub {stub_doc!r}")
    assert checked > 100, f"only {checked} names found in {STUB}"
    assert not problems, f"{len(problems)} of {checked} names:\n" + "\n".join(problems)


@pytest.mark.parametrize("name", sorted(set(kc.__all__) - NOT_DOCUMENTABLE))
def test_help_renders_every_public_name_with_its_docstring(name: str) -> None:
    obj = getattr(kc, name)
    doc = inspect.getdoc(obj)
    assert doc, f"krabka_coordination.{name} has no docstring"
    text = pydoc.plain(pydoc.render_doc(obj))
    assert doc.splitlines()[0] in text, text[:500]


def test_help_of_the_package_lists_its_api() -> None:
    text = pydoc.plain(pydoc.render_doc(kc))
    assert "Leader election, leases and fencing tokens" in text
    for name in ("Client", "AsyncClient", "Leadership", "FencingToken", "role_partition"):
        assert name in text, name


def test_not_documentable_names_exist() -> None:
    # The exemptions above must name real exports, or they hide nothing.
    assert NOT_DOCUMENTABLE <= set(kc.__all__)
