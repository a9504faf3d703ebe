"""The schema registry and `choirctl schema`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from jsonschema import Draft202012Validator
from typer.testing import CliRunner

from choir.ctl.schema import schema
from choir.errors import ExitCode, NotFoundError
from choir.protocol import Verb
from choir.protocol.operator.contract import OPERATOR_MODELS
from choir.protocol.schemas import SCHEMAS, json_schema, schema_names

app = typer.Typer()
app.command()(schema)
runner = CliRunner()


def test_registry_names_every_verb_payload_and_model_family():
    names = set(schema_names())

    for verb in Verb:
        stem = verb.value.lower().replace("_", "-")
        assert {f"{stem}-request", f"{stem}-response"} <= names
    assert {
        "envelope",
        "event",
        "committed-event",
        "core-job-start",
        "core-event",
        "core-injection",
        "tool-manifest",
        "skill-spec",
        "reference-summary",
        "memory-delta",
        "version",
        "snapshot",
        "push",
    } <= names


def test_registry_names_every_operator_verbs_request_answer_and_items():
    names = set(schema_names())

    for verb, models in OPERATOR_MODELS.items():
        assert f"operator.{verb}.request" in names
        assert (f"operator.{verb}.answer" in names) == (models.answer is not None)
        assert (f"operator.{verb}.item" in names) == (models.item is not None)
    assert {"operator.agent.start.request", "operator.subscribe.item"} <= names


def test_an_operator_answer_schema_validates_its_golden_answer():
    golden = json.loads((Path(__file__).parent / "golden" / "v1" / "operator.json").read_text())

    for verb in ("status", "agent.start", "config.load"):
        validator = Draft202012Validator(json_schema(f"operator.{verb}.answer"))
        for answer in golden[verb]["answers"]:
            validator.validate(answer)
    feed = Draft202012Validator(json_schema("operator.subscribe.item"))
    for item in golden["subscribe"]["items"]:
        feed.validate(item)


def test_schema_command_prints_an_operator_verbs_request():
    result = runner.invoke(app, ["operator.agent.start.request"])

    assert result.exit_code == 0, result.output
    printed = json.loads(result.output)
    assert printed["required"] == ["agent_id"]
    assert {"overrides", "new_session", "resume"} <= set(printed["properties"])


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_every_schema_is_a_valid_json_schema(name: str):
    document = json_schema(name)

    Draft202012Validator.check_schema(document)
    assert document["title"]


def test_schema_command_without_a_name_lists_the_names():
    result = runner.invoke(app, [])

    assert result.exit_code == 0
    assert result.output.splitlines() == schema_names()


def test_schema_command_prints_the_json_schema():
    result = runner.invoke(app, ["tool-manifest"])

    assert result.exit_code == 0
    printed = json.loads(result.output)
    assert printed == json.loads(json.dumps(json_schema("tool-manifest")))
    assert set(printed["required"]) == {"llm", "runtime"}


def test_schema_command_refuses_an_unknown_name_listing_the_known_ones():
    result = runner.invoke(app, ["tool-manifst"])

    assert isinstance(result.exception, NotFoundError)
    assert result.exception.exit_code == ExitCode.NOT_FOUND
    assert str(result.exception).startswith(
        "unknown schema 'tool-manifst' (known: committed-event, "
    )
    assert "tool-manifest" in str(result.exception)
