"""`ensure_json_schema`: jsonschema-rs answers yes fast, and never where `jsonschema` says no."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

import choir
from choir.protocol.json_schema import ensure_json_schema

SCHEMAS: list[dict[str, Any]] = [
    {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    {"type": "object", "properties": {"a": {"pattern": "^[a-z]+$"}}},
    {"type": "object", "patternProperties": {"^x-": {"type": "string"}}},
    {"type": "object", "properties": {"pattern": {"type": "string"}}},  # an argument so named
    {"type": "object", "properties": {"a": {"format": "anything"}}},
    {"enum": []},
    {
        "type": "object",
        "$defs": {"n": {"type": "integer"}},
        "properties": {"x": {"$ref": "#/$defs/n"}},
    },
    # invalid ones: each must be refused, with jsonschema's message
    {"items": [{}]},
    {"type": "object", "required": "a"},
    {"type": "object", "properties": {"a": {"minLength": -1}}},
    {"type": "integer", "multipleOf": 0},
    {"type": ["string", "string"]},
    {"type": "object", "properties": {"a": {"pattern": "(a"}}},  # no regex at all
    {"type": "object", "properties": {"a": {"pattern": "\\p{L}"}}},  # ECMA, not Python
    {"type": "object", "patternProperties": {"(x": {}}},
    # another draft's meta-schema: jsonschema checks it against 2020-12 all the same
    {"$schema": "http://json-schema.org/draft-07/schema#", "items": [{}]},
]


def jsonschema_says(schema: dict[str, Any]) -> str | None:
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as error:
        return error.message
    return None


@pytest.mark.parametrize("schema", SCHEMAS, ids=[json.dumps(s)[:60] for s in SCHEMAS])
def test_the_answer_is_jsonschemas(schema: dict[str, Any]):
    refused = jsonschema_says(schema)
    if refused is None:
        assert ensure_json_schema(schema) is schema
    else:
        with pytest.raises(ValueError, match="not a valid JSON Schema") as caught:
            ensure_json_schema(schema)
        assert refused in str(caught.value)


def test_checking_the_seed_tools_takes_milliseconds():
    """choird checks every manifest when it builds an agent's tree, and choir-agent again at
    every start: with `jsonschema` alone that was ~50 ms of CPU for the seed tools."""
    seeds = Path(choir.__file__).parent / "_seeds"
    schemas = []
    for manifest in seeds.rglob("*.json"):
        document = json.loads(manifest.read_text())
        llm = document.get("llm") if isinstance(document, dict) else None
        if isinstance(llm, dict) and isinstance(llm.get("parameters"), dict):
            schemas.append(llm["parameters"])
    assert len(schemas) >= 10
    began = time.process_time()
    for schema in schemas:
        ensure_json_schema(schema)
    assert time.process_time() - began < 0.01 * len(schemas) / 10
