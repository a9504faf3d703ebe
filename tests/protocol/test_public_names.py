"""`choir.protocol` lists each public name once: its lazy table (`_LAZY`), from which `__all__`
is derived; the `TYPE_CHECKING` imports the type checker reads must say exactly the same."""

from __future__ import annotations

import ast
import importlib
from collections import Counter
from pathlib import Path

import pytest

import choir.protocol as protocol

INIT = Path(protocol.__file__)


def _tree() -> ast.Module:
    return ast.parse(INIT.read_text(), str(INIT))


def lazy_table_entries() -> list[tuple[str, str]]:
    """The `_LAZY` literal as written, duplicates kept (a dict would drop them silently)."""
    for node in _tree().body:
        if isinstance(node, ast.AnnAssign) and ast.unparse(node.target) == "_LAZY":
            assert isinstance(node.value, ast.Dict)
            return [
                (ast.literal_eval(key), ast.literal_eval(value))
                for key, value in zip(node.value.keys, node.value.values, strict=True)
                if key is not None
            ]
    raise AssertionError("choir/protocol/__init__.py has no _LAZY table")


def type_checking_imports() -> list[tuple[str, str]]:
    """(name, module) of every import under `if TYPE_CHECKING:`."""
    found: list[tuple[str, str]] = []
    for node in _tree().body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for statement in node.body:
                assert isinstance(statement, ast.ImportFrom), ast.unparse(statement)
                module = statement.module or ""
                found += [(alias.asname or alias.name, module) for alias in statement.names]
    return found


def test_no_public_name_is_listed_twice() -> None:
    names = Counter(name for name, _ in lazy_table_entries())
    assert [name for name, count in names.items() if count > 1] == []


def test_all_is_the_lazy_table() -> None:
    assert protocol.__all__ == [name for name, _ in lazy_table_entries()]


def test_every_listed_name_resolves_to_its_submodules_object() -> None:
    for name, module in lazy_table_entries():
        assert getattr(protocol, name) is getattr(importlib.import_module(module), name), name


def test_the_type_checkers_imports_are_the_lazy_table() -> None:
    imports = type_checking_imports()
    assert len(imports) == len(set(imports))
    assert sorted(imports) == sorted(lazy_table_entries())


def test_an_unlisted_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="NotAProtocolName"):
        protocol.NotAProtocolName  # type: ignore[attr-defined]  # noqa: B018
