"""Attribute docstrings as field descriptions, read from each source file once.

pydantic's `use_attribute_docstrings` finds every model's source by walking the interpreter's
frames and tokenizing the class block (`inspect.getmodule` per frame, then `getblock`): ~1 ms a
model, about a quarter of choir-agent's import time with ~120 models. `WireModel` and
`ConfigModel` read the same docstrings here instead: each source file is parsed once, and every
class in it found by its qualified name. The rule is pydantic's: a string statement right after
an annotated assignment in the class body documents that attribute, `inspect.cleandoc`ed, and
an explicit `Field(description=...)` wins. `tests/protocol/test_docstrings.py` checks every
model against pydantic's own extraction. What a file yields is kept beside its bytecode for the
next process (`choir.protocol.docstring_cache`).
"""

from __future__ import annotations

import ast
import inspect
import sys
import textwrap
from dataclasses import dataclass
from functools import cache
from types import FrameType
from typing import Any

from pydantic import BaseModel

from choir.protocol.docstring_cache import Found, load, store


def describe_fields(cls: type[BaseModel]) -> None:
    """Give `cls`'s own fields without a description their attribute docstring."""
    docs = attribute_docstrings(cls)
    for name, field in cls.model_fields.items():
        if field.description is None and name in docs:
            field.description = docs[name]


def attribute_docstrings(cls: type[Any]) -> dict[str, str]:
    """Attribute name -> docstring, from the body of `cls`'s own class statement."""
    statement = _class_statement(cls)
    return dict(statement.docs) if statement is not None else {}


@dataclass(frozen=True)
class _Statement:
    """One class statement of a source file: its lines and its attribute docstrings. Only
    these are kept per file, not the syntax tree (~1.7 MB for choir-agent's models, held for
    the life of the process by the cache)."""

    first: int
    last: int
    docs: dict[str, str]


def _class_statement(cls: type[Any]) -> _Statement | None:
    module = sys.modules.get(cls.__module__)
    filename = getattr(module, "__file__", None)
    if filename is None:
        return _parsed_alone(cls)
    candidates = _classes(filename).get(cls.__qualname__, [])
    if len(candidates) == 1:
        return candidates[0]
    # Defined more than once (in if/else branches): the statement running now, as pydantic finds
    # it, is the one whose lines hold the line a frame of that file is executing.
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_filename == filename:
            for statement in candidates:
                if statement.first <= frame.f_lineno <= statement.last:
                    return statement
        frame = frame.f_back
    return _parsed_alone(cls)


def _parsed_alone(cls: type[Any]) -> _Statement | None:
    """The class statement from `inspect.getsource`, for a class whose file is unknown."""
    try:
        source = textwrap.dedent(inspect.getsource(cls))
        node = ast.parse(source).body[0]
    except (OSError, TypeError, SyntaxError, IndexError):
        return None
    return _statement(node) if isinstance(node, ast.ClassDef) else None


def _statement(node: ast.ClassDef) -> _Statement:
    return _Statement(*_summary(node))


def _summary(node: ast.ClassDef) -> tuple[int, int, dict[str, str]]:
    docs: dict[str, str] = {}
    _DocstringVisitor(docs).generic_visit(node)
    return node.lineno, node.end_lineno or node.lineno, docs


@cache
def _classes(filename: str) -> dict[str, list[_Statement]]:
    """Qualified name -> the class statements of a source file that define it."""
    try:
        with open(filename, "rb") as file:
            source = file.read()
    except OSError:
        return {}
    found = load(filename, source)
    if found is None:
        found = _parsed(filename, source)
        store(filename, source, found)
    return {name: [_Statement(*each) for each in statements] for name, statements in found.items()}


def _parsed(filename: str, source: bytes) -> Found:
    try:
        tree = ast.parse(source, filename)
    except (SyntaxError, ValueError):
        return {}
    found: Found = {}
    _index(tree.body, "", found)
    return found


def _index(body: list[ast.stmt], prefix: str, found: Found) -> None:
    for node in body:
        if isinstance(node, ast.ClassDef):
            name = prefix + node.name
            found.setdefault(name, []).append(_summary(node))
            _index(node.body, f"{name}.", found)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            _index(node.body, f"{prefix}{node.name}.<locals>.", found)
        else:  # if/try/with blocks hold class statements under the same qualified name
            for field in ("body", "orelse", "finalbody", "handlers"):
                nested = getattr(node, field, None)
                if isinstance(nested, list):
                    _index(nested, prefix, found)


class _DocstringVisitor(ast.NodeVisitor):
    """pydantic's rule: a string expression right after `name: type [= value]` documents it;
    nested classes and functions are not looked into."""

    def __init__(self, docs: dict[str, str]) -> None:
        self.docs = docs
        self.target: str | None = None
        self.previous: type[ast.AST] | None = None

    def visit(self, node: ast.AST) -> None:
        super().visit(node)
        self.previous = type(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if isinstance(node.target, ast.Name):
            self.target = node.target.id

    def visit_Expr(self, node: ast.Expr) -> None:
        value = node.value
        if (
            isinstance(value, ast.Constant)
            and isinstance(value.value, str)
            and self.previous is ast.AnnAssign
        ):
            if self.target:
                self.docs[self.target] = inspect.cleandoc(value.value)
            self.target = None

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        pass

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        pass

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        pass
