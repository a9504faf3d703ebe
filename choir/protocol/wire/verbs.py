"""The agent -> choird verbs (§12.5) and the payload models of each.

Beyond the spec's 8: PUT_ARTIFACT, FETCH_ARTIFACT and FETCH_EVENTS carry what is too large for one
frame — an event's artifact, a resume's handover past its first page
(`choir.protocol.wire.artifacts`).
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any, NamedTuple

from choir.protocol.base import WireModel
from choir.protocol.wire.artifacts import (
    FetchArtifactRequest,
    FetchArtifactResponse,
    FetchEventsRequest,
    FetchEventsResponse,
    PutArtifactRequest,
    PutArtifactResponse,
)
from choir.protocol.wire.payloads import (
    Ack,
    ExecuteHostToolRequest,
    ExecuteHostToolResponse,
    FetchDynamicConfigRequest,
    FetchDynamicConfigResponse,
    GetSecretsRequest,
    GetSecretsResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    InitHelloRequest,
    InitHelloResponse,
    ReportStatusRequest,
    RequestApprovalRequest,
    RequestApprovalResponse,
    TerminateSelfRequest,
)


class Verb(StrEnum):
    """Everything an agent may ask of choird. None can perform a host-destructive operation."""

    INIT_HELLO = "INIT_HELLO"
    GET_SECRETS = "GET_SECRETS"
    HEARTBEAT = "HEARTBEAT"
    REQUEST_APPROVAL = "REQUEST_APPROVAL"
    REPORT_STATUS = "REPORT_STATUS"
    TERMINATE_SELF = "TERMINATE_SELF"
    FETCH_DYNAMIC_CONFIG = "FETCH_DYNAMIC_CONFIG"
    EXECUTE_HOST_TOOL = "EXECUTE_HOST_TOOL"
    PUT_ARTIFACT = "PUT_ARTIFACT"
    FETCH_ARTIFACT = "FETCH_ARTIFACT"
    FETCH_EVENTS = "FETCH_EVENTS"


class VerbModels(NamedTuple):
    request: type[WireModel]
    response: type[WireModel]


VERB_MODELS: Mapping[Verb, VerbModels] = {
    Verb.INIT_HELLO: VerbModels(InitHelloRequest, InitHelloResponse),
    Verb.GET_SECRETS: VerbModels(GetSecretsRequest, GetSecretsResponse),
    Verb.HEARTBEAT: VerbModels(HeartbeatRequest, HeartbeatResponse),
    Verb.REQUEST_APPROVAL: VerbModels(RequestApprovalRequest, RequestApprovalResponse),
    Verb.REPORT_STATUS: VerbModels(ReportStatusRequest, Ack),
    Verb.TERMINATE_SELF: VerbModels(TerminateSelfRequest, Ack),
    Verb.FETCH_DYNAMIC_CONFIG: VerbModels(FetchDynamicConfigRequest, FetchDynamicConfigResponse),
    Verb.EXECUTE_HOST_TOOL: VerbModels(ExecuteHostToolRequest, ExecuteHostToolResponse),
    Verb.PUT_ARTIFACT: VerbModels(PutArtifactRequest, PutArtifactResponse),
    Verb.FETCH_ARTIFACT: VerbModels(FetchArtifactRequest, FetchArtifactResponse),
    Verb.FETCH_EVENTS: VerbModels(FetchEventsRequest, FetchEventsResponse),
}
"""verb -> (request payload model, response payload model)."""


def parse_request_payload(verb: Verb, payload: Mapping[str, Any]) -> WireModel:
    """The typed request payload of `verb`; raises pydantic.ValidationError when malformed."""
    return VERB_MODELS[verb].request.model_validate(payload)


def parse_response_payload(verb: Verb, payload: Mapping[str, Any]) -> WireModel:
    """The typed response payload of `verb`; raises pydantic.ValidationError when malformed."""
    return VERB_MODELS[verb].response.model_validate(payload)
