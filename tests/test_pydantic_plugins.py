"""choird and choir-agent run pydantic without its plugin loader when every plugin is disabled
(`choir.pydantic_plugins`): the loader's import of importlib.metadata was 10-25 ms of a start."""

from __future__ import annotations

import ast
import inspect
import os

import pydantic.plugin._schema_validator as schema_validator

from tests.harness.processes import run_probe

PROBE = """
import sys
from choir.pydantic_plugins import skip
skip()
from pydantic import BaseModel
class Point(BaseModel):
    x: int
assert Point.model_validate({"x": 1}).x == 1
loader = sys.modules["pydantic.plugin._loader"]
print([getattr(loader, "__file__", None) is not None, list(loader.get_plugins()),
       "importlib.metadata" in sys.modules])
"""


def probe(value: str | None) -> list[object]:
    env = {k: v for k, v in os.environ.items() if k != "PYDANTIC_DISABLE_PLUGINS"}
    if value is not None:
        env["PYDANTIC_DISABLE_PLUGINS"] = value
    found: list[object] = run_probe(PROBE, env=env, timeout=60)
    return found


def test_pydantic_asks_its_plugin_loader_for_get_plugins_alone() -> None:
    """What the stand-in provides: a pydantic that imports anything else from its loader
    fails here, not in choird's first validator."""
    tree = ast.parse(inspect.getsource(schema_validator))
    imported = [
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "_loader"
        for alias in node.names
    ]
    assert imported == ["get_plugins"]


def test_without_an_operator_setting_no_loader_and_no_importlib_metadata() -> None:
    assert probe(None) == [False, [], False]


def test_every_spelling_of_all_plugins_disabled_skips_the_loader() -> None:
    for value in ("__all__", "1", "true"):
        assert probe(value) == [False, [], False], value


def test_an_operator_disabling_some_plugins_keeps_pydantics_loader() -> None:
    """A list of plugin names is the operator's: pydantic's loader applies it."""
    assert probe("some_plugin") == [True, [], True]
