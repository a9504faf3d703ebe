"""`ensure_json_schema`: jsonschema-rs answers yes fast, and never where `jsonschema` says no;
a schema found valid is not checked again; choird (no jsonschema-rs loaded) keeps to jsonschema."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

import choir
from choir.protocol import json_schema
from choir.protocol.json_schema import ensure_json_schema, fast_checks

REPO_ROOT = Path(__file__).resolve().parents[2]

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
    # not plain JSON: jsonschema-rs would read the tuple as an array
    {"enum": (1, 2)},
    {"$schema": "http://json-schema.org/draft-07/schema#", "items": [{}]},
]


def jsonschema_says(schema: dict[str, Any]) -> str | None:
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as error:
        return error.message
    return None


@pytest.mark.parametrize("fast", [True, False], ids=["jsonschema-rs loaded", "remembered"])
@pytest.mark.parametrize("schema", SCHEMAS, ids=[json.dumps(s)[:60] for s in SCHEMAS])
def test_the_answer_is_jsonschemas(schema: dict[str, Any], fast: bool):
    """Asked twice: the second answer comes from what the first remembered."""
    if fast:
        fast_checks()
    json_schema._CHECKED.clear()
    for _ in range(2):
        check(schema)


def test_a_schema_is_remembered_by_its_json_only():
    """A tuple, NaN or a key not a string has no JSON of its own: never taken for another."""
    json_schema._CHECKED.clear()
    ensure_json_schema({"enum": [1, 2]})
    ensure_json_schema({"minimum": float("nan")})
    for twin in ({"enum": (1, 2)}, {"minimum": None}):
        with pytest.raises(ValueError, match="not a valid JSON Schema"):
            ensure_json_schema(twin)


def check(schema: dict[str, Any]) -> None:
    refused = jsonschema_says(schema)
    if refused is None:
        assert ensure_json_schema(schema) is schema
    else:
        with pytest.raises(ValueError, match="not a valid JSON Schema") as caught:
            ensure_json_schema(schema)
        assert refused in str(caught.value)


def seed_schemas() -> list[dict[str, Any]]:
    seeds = Path(choir.__file__).parent / "_seeds"
    schemas = []
    for manifest in seeds.rglob("*.json"):
        document = json.loads(manifest.read_text())
        llm = document.get("llm") if isinstance(document, dict) else None
        if isinstance(llm, dict) and isinstance(llm.get("parameters"), dict):
            schemas.append(llm["parameters"])
    assert len(schemas) >= 10
    return schemas


def test_checking_the_seed_tools_takes_milliseconds():
    """choir-agent checks every manifest at every start: with `jsonschema` alone that was
    ~50 ms of CPU for the seed tools."""
    schemas = seed_schemas()
    fast_checks()
    json_schema._CHECKED.clear()
    began = time.process_time()
    for schema in schemas:
        ensure_json_schema(schema)
    assert time.process_time() - began < 0.01 * len(schemas) / 10


def test_choird_checks_without_jsonschema_rs_and_once_per_schema():
    """choird builds an agent's tree at every start: the second time its schemas are known, and
    it never loads jsonschema-rs (5 MB resident) for this."""
    probe = (
        "import sys, time\n"
        "from tests.protocol.test_json_schema_check import seed_schemas\n"
        "from choir.protocol.json_schema import ensure_json_schema\n"
        "schemas = seed_schemas()\n"
        "[ensure_json_schema(s) for s in schemas]\n"
        "began = time.process_time()\n"
        "[ensure_json_schema(s) for s in schemas]\n"
        "print(time.process_time() - began, 'jsonschema_rs' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    )
    second_s, loaded = done.stdout.split()
    assert loaded == "False"
    assert float(second_s) < 0.005
