"""choir.protocol.docstrings reads the same field descriptions pydantic's own
`use_attribute_docstrings` would, for every model of choir."""

from __future__ import annotations

import importlib
import pkgutil

import pytest
from pydantic import BaseModel, ConfigDict, Field
from pydantic._internal._docs_extraction import extract_docstrings_from_cls

import choir
from choir.config.base import ConfigModel
from choir.protocol.base import WireModel
from choir.protocol.docstrings import attribute_docstrings


def every_model() -> list[type[BaseModel]]:
    for module in pkgutil.walk_packages(choir.__path__, "choir."):
        if not module.name.startswith("choir.tui"):  # Textual's own models are not ours
            importlib.import_module(module.name)
    found: list[type[BaseModel]] = []
    pending: list[type[BaseModel]] = [WireModel, ConfigModel]
    while pending:
        model = pending.pop()
        for sub in model.__subclasses__():
            if sub not in found:
                found.append(sub)
                pending.append(sub)
    return found


MODELS = every_model()


def test_choir_has_the_models_this_test_walks() -> None:
    assert len(MODELS) > 100


@pytest.mark.parametrize("model", MODELS, ids=lambda model: model.__qualname__)
def test_descriptions_match_pydantic(model: type[BaseModel]) -> None:
    """The description of each field: the docstring pydantic would find in the class's own
    body, else the one inherited from a base, else an explicit `Field(description=...)`."""
    own = extract_docstrings_from_cls(model, use_inspect=True)
    assert attribute_docstrings(model) == own
    for name, field in model.model_fields.items():
        if name in own and name in model.__annotations__:
            explicit = model.__dict__.get(name)
            wanted = getattr(explicit, "description", None) or own[name]
            assert field.description == wanted, f"{model.__qualname__}.{name}"


def test_a_class_defined_twice_in_a_file_reads_its_own_statement() -> None:
    def make(first: bool) -> type[WireModel]:
        if first:

            class Twice(WireModel):
                a: int
                """first"""

        else:

            class Twice(WireModel):  # type: ignore[no-redef]
                a: int
                """second"""

        return Twice

    assert make(True).model_fields["a"].description == "first"
    assert make(False).model_fields["a"].description == "second"


def test_local_classes_and_explicit_descriptions() -> None:
    class Local(WireModel):
        model_config = ConfigDict(frozen=True)
        plain: int = 1
        """Documented
        over two lines."""
        explicit: int = Field(default=2, description="from Field")
        """ignored: Field's description wins"""
        bare: int = 3

    fields = Local.model_fields
    assert fields["plain"].description == "Documented\nover two lines."
    assert fields["explicit"].description == "from Field"
    assert fields["bare"].description is None
    schema = Local.model_json_schema()["properties"]
    assert schema["plain"]["description"] == "Documented\nover two lines."
