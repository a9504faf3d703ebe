"""The agent verbs (§12.5's 8, and three for data too large for one frame): payload models per
verb, envelopes, and the checks on heartbeats and recovery."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from choir.protocol import (
    VERB_MODELS,
    Ack,
    ErrorCode,
    ExecuteHostToolResponse,
    GetSecretsResponse,
    HeartbeatRequest,
    InitHelloResponse,
    RequestEnvelope,
    ResponseEnvelope,
    ToolResult,
    Verb,
    parse_request_payload,
    parse_response_payload,
    validation_problems,
)

GOLDEN = Path(__file__).parent / "golden" / "v1"
VERBS = json.loads((GOLDEN / "verbs.json").read_text())


def test_there_are_the_eight_verbs_of_section_12_5_and_the_three_for_large_data():
    assert [verb.value for verb in Verb] == [
        "INIT_HELLO",
        "GET_SECRETS",
        "HEARTBEAT",
        "REQUEST_APPROVAL",
        "REPORT_STATUS",
        "TERMINATE_SELF",
        "FETCH_DYNAMIC_CONFIG",
        "EXECUTE_HOST_TOOL",
        "PUT_ARTIFACT",
        "FETCH_ARTIFACT",
        "FETCH_EVENTS",
    ]
    assert set(VERB_MODELS) == set(Verb)


@pytest.mark.parametrize("verb", list(Verb))
def test_parse_payload_gives_the_verbs_models(verb: Verb):
    request = parse_request_payload(verb, VERBS[verb.value]["request"])
    response = parse_response_payload(verb, VERBS[verb.value]["response"])

    assert type(request) is VERB_MODELS[verb].request
    assert type(response) is VERB_MODELS[verb].response


@pytest.mark.parametrize("verb", list(Verb))
def test_payload_of_another_verb_is_refused(verb: Verb):
    other = Verb.TERMINATE_SELF if verb is not Verb.TERMINATE_SELF else Verb.GET_SECRETS

    with pytest.raises(ValidationError):
        parse_request_payload(verb, VERBS[other.value]["request"])


def test_envelope_round_trip_and_lease_token_stays_out_of_repr():
    envelope = RequestEnvelope(
        request_id="r1", session_id="s1", lease_token="lease-secret", verb=Verb.HEARTBEAT
    )

    assert RequestEnvelope.model_validate_json(envelope.model_dump_json()) == envelope
    assert "lease-secret" not in repr(envelope)


def test_unknown_verb_is_refused():
    with pytest.raises(ValidationError, match="INIT_HELLO"):
        RequestEnvelope.model_validate(
            {"request_id": "r", "session_id": "s", "lease_token": "t", "verb": "DELETE_HOST"}
        )


def test_response_envelope_success_and_failure():
    ok = ResponseEnvelope.success("r1", Ack())
    failed = ResponseEnvelope.failure("r1", ErrorCode.UNAUTHORIZED, "bad lease")

    assert (ok.ok, ok.payload, ok.error) == (True, {"ack": True}, None)
    assert failed.error is not None
    assert (failed.ok, failed.payload, failed.error.code) == (False, None, "unauthorized")


@pytest.mark.parametrize(
    "document",
    [
        {"request_id": "r", "ok": True},
        {
            "request_id": "r",
            "ok": True,
            "payload": {},
            "error": {"code": "internal", "message": "x"},
        },
        {"request_id": "r", "ok": False},
        {
            "request_id": "r",
            "ok": False,
            "payload": {},
            "error": {"code": "internal", "message": "x"},
        },
    ],
)
def test_response_envelope_needs_exactly_one_outcome(document: dict[str, Any]):
    with pytest.raises(ValidationError, match="response has"):
        ResponseEnvelope.model_validate(document)


def test_secret_values_travel_on_the_wire_but_not_in_reprs():
    response = GetSecretsResponse.model_validate({"secrets": {"openrouter-key": "sk-live-123"}})

    assert "sk-live-123" not in repr(response)
    assert "sk-live-123" not in str(response.secrets)
    assert response.model_dump(mode="json") == {"secrets": {"openrouter-key": "sk-live-123"}}
    assert response.secrets["openrouter-key"].get_secret_value() == "sk-live-123"


def _heartbeat(**changes: Any) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(json.dumps(VERBS["HEARTBEAT"]["request"]))
    document.update(changes)
    return document


def _problems(model: Any, document: dict[str, Any]) -> list[str]:
    with pytest.raises(ValidationError) as caught:
        model.model_validate(document)
    return validation_problems(caught.value)


def test_heartbeat_revisions_must_match_the_patch_count():
    assert _problems(HeartbeatRequest, _heartbeat(new_rev=18)) == [
        "new_rev: 18 does not equal base_rev 14 plus 3 patches"
    ]


def test_heartbeat_patches_must_be_contiguous():
    document = _heartbeat()
    document["patches"] = [document["patches"][0], document["patches"][2]]
    document["new_rev"] = 16

    assert _problems(HeartbeatRequest, document) == ["patches[1].rev: expected 16, got 17"]


def test_heartbeat_hash_new_must_be_the_last_patch_hash():
    assert _problems(HeartbeatRequest, _heartbeat(hash_new="f" * 64)) == [
        "hash_new: does not match the hash of the last patch"
    ]


def test_heartbeat_patches_must_link_to_hash_prev():
    assert _problems(HeartbeatRequest, _heartbeat(hash_prev="e" * 64)) == [
        "patches[0].hash_prev: does not match the hash of rev 14"
    ]


def test_empty_heartbeat_keeps_the_head():
    head = "c" * 64
    beat = HeartbeatRequest.model_validate(
        _heartbeat(
            base_rev=17, new_rev=17, patches=[], hash_prev=head, hash_new=head, snapshot=None
        )
    )

    assert beat.patches == []


def test_fresh_init_hello_response_carries_no_history():
    document = dict(VERBS["INIT_HELLO"]["response"], status="fresh")

    assert _problems(InitHelloResponse, document) == [
        "status: a fresh session comes without snapshot or tail_events"
    ]


def test_resumed_tail_must_continue_the_snapshot():
    document: dict[str, Any] = json.loads(json.dumps(VERBS["INIT_HELLO"]["response"]))
    document["snapshot"]["rev"] = 14

    assert _problems(InitHelloResponse, document) == ["tail_events[0].rev: expected 15, got 16"]


def test_init_hello_response_hides_the_lease_token_from_repr():
    response = InitHelloResponse.model_validate(VERBS["INIT_HELLO"]["response"])

    assert response.lease_token not in repr(response)


@pytest.mark.parametrize(
    ("result", "status"),
    [
        (ToolResult.ok("fetched", text="hi"), "success"),
        (ToolResult.fail("timeout", "page did not load"), "error"),
        (ToolResult(status="timeout", summary="slow"), "error"),
    ],
)
def test_execute_host_tool_response_wraps_a_tool_result(result: ToolResult, status: str):
    response = ExecuteHostToolResponse.of("call_1", result)

    assert response.status == status
    assert response.tool_result() == result
