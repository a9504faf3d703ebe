"""The operator API's wire form is pinned: choirctl `--json` prints it, the TUI reads it.

`golden/v1/operator.json` holds, per verb, a request, its answers (one per form an answer
takes: a refused config load has no hash, a reset that stopped an agent says so) and its stream
items, taken from a real choird. Each must parse with the verb's model and re-serialize to the
same bytes — key order included, since `--json` output is compared as text by scripts.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, get_args

import pytest
from pydantic import TypeAdapter

from choir.protocol.operator.contract import OPERATOR_MODELS
from choir.protocol.operator.items import FeedItem, LogItem, UpdateAllItem
from choir.protocol.operator.verbs import OperatorVerb

GOLDEN: dict[str, dict[str, Any]] = json.loads(
    (Path(__file__).parent / "golden" / "v1" / "operator.json").read_text()
)


def _same_bytes(document: Any, parsed: Any, adapter: TypeAdapter[Any]) -> None:
    dumped = adapter.dump_python(parsed, mode="json")
    assert json.dumps(dumped) == json.dumps(document)


def test_there_is_a_golden_entry_per_verb():
    assert set(GOLDEN) == {verb.value for verb in OperatorVerb}


@pytest.mark.parametrize("verb", list(OperatorVerb))
def test_golden_request_parses_and_reserializes_byte_stable(verb: OperatorVerb):
    document = GOLDEN[verb]["request"]
    model = OPERATOR_MODELS[verb].request

    _same_bytes(document, model.model_validate(document), TypeAdapter(model))


@pytest.mark.parametrize("verb", [verb for verb in OperatorVerb if OPERATOR_MODELS[verb].answer])
def test_golden_answers_parse_and_reserialize_byte_stable(verb: OperatorVerb):
    model = OPERATOR_MODELS[verb].answer
    assert model is not None
    answers = GOLDEN[verb]["answers"]
    assert answers

    for document in answers:
        _same_bytes(document, model.model_validate(document), TypeAdapter(model))


@pytest.mark.parametrize("verb", [verb for verb in OperatorVerb if OPERATOR_MODELS[verb].item])
def test_golden_stream_items_parse_and_reserialize_byte_stable(verb: OperatorVerb):
    adapter: TypeAdapter[Any] = TypeAdapter(OPERATOR_MODELS[verb].item)
    items = GOLDEN[verb]["items"]
    assert items

    for document in items:
        _same_bytes(document, adapter.validate_python(document), adapter)


def _kinds(union: Any) -> set[str]:
    return {member.model_fields["kind"].default for member in get_args(get_args(union)[0])}


def test_goldens_cover_every_feed_and_log_item_kind():
    feed = {item["kind"] for item in GOLDEN["subscribe"]["items"]}
    logs = {item["kind"] for item in GOLDEN["logs"]["items"]}
    update = {item["kind"] for item in GOLDEN["agent.update_all"]["items"]}

    assert feed == _kinds(FeedItem)
    assert logs == _kinds(LogItem)
    assert update == _kinds(UpdateAllItem)


def test_an_answer_key_that_was_never_sent_stays_off_the_wire():
    """Outcome-dependent keys (`Sparse` models) appear only when given."""
    model = OPERATOR_MODELS[OperatorVerb.WORKSPACE_RESET].answer
    assert model is not None
    plain = {"name": "default", "path": "/w", "removed": 0}

    assert model.model_validate(plain).model_dump(mode="json") == plain


def test_a_misspelled_answer_field_is_refused():
    model = OPERATOR_MODELS[OperatorVerb.SESSION_CANCEL].answer
    assert model is not None

    with pytest.raises(ValueError, match="requestd"):
        model.model_validate({"session_id": "s", "job_name": "j", "requestd": True})
