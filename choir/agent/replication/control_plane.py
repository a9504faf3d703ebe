"""choir-agent's side of the control plane (§12.2 `ControlPlane`): the agent verbs, typed.

One object over whichever transport was picked at start-up (`choir.transport.connect`), so the
agent's logic never branches on transport. It also serves the kernel as its `HostBridge`: host
tools go out as EXECUTE_HOST_TOOL, meta tools as REQUEST_APPROVAL.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable
from typing import Any, TypeVar

from pydantic import ValidationError

from choir.agent.replication.job_tokens import JobEnded, JobTokens
from choir.agent.replication.link import ReconnectingClient
from choir.agent.replication.outgoing import OutgoingHeartbeat
from choir.errors import ConflictError
from choir.protocol import (
    EDGE_LANE,
    Ack,
    ExecuteHostToolRequest,
    ExecuteHostToolResponse,
    FetchDynamicConfigRequest,
    FetchDynamicConfigResponse,
    GetSecretsRequest,
    GetSecretsResponse,
    HeartbeatResponse,
    InitHelloRequest,
    InitHelloResponse,
    PushEnvelope,
    ReportStatusRequest,
    RequestApprovalRequest,
    RequestApprovalResponse,
    TerminateSelfRequest,
    ToolResult,
    Verb,
    WireModel,
)
from choir.protocol.wire.artifacts import (
    FetchArtifactRequest,
    FetchArtifactResponse,
    FetchEventsRequest,
    FetchEventsResponse,
    PutArtifactRequest,
    PutArtifactResponse,
)
from choir.protocol.wire.job_tokens import JOB_TOKEN_REFUSED
from choir.transport.client import Client
from choir.transport.errors import TransportError

ResponseT = TypeVar("ResponseT", bound=WireModel)

_APPROVAL_TYPES = {
    "choir.propose.tool": "tool",
    "choir.propose.skill": "skill",
    "choir.propose.config_change": "config_change",
    "choir.propose.repo_change": "repo_change",
}


class ControlPlane:
    """The agent's typed client of choird; every call carries the session's lease."""

    def __init__(self, client: Client) -> None:
        self._client = client

    def on_connected(self, listener: Callable[[], None]) -> Callable[[], None]:
        """Call `listener` whenever the connection to choird is (re)established; returns the
        unsubscribe callable. Only a reconnecting client ever connects again."""
        if isinstance(self._client, ReconnectingClient):
            return self._client.on_connected(listener)
        return lambda: None

    async def init_hello(self, request: InitHelloRequest) -> InitHelloResponse:
        answer = await self._client.call(Verb.INIT_HELLO.value, request.model_dump(mode="json"))
        return init_hello_answer(answer)

    async def get_secrets(self, request: GetSecretsRequest) -> GetSecretsResponse:
        return await self._call(Verb.GET_SECRETS, request, GetSecretsResponse)

    async def heartbeat(self, request: OutgoingHeartbeat) -> HeartbeatResponse:
        """choird validates the request in full; the agent sends its log's JSON as it is."""
        answer = await self._client.call(Verb.HEARTBEAT.value, request.wire())
        return _parsed(Verb.HEARTBEAT, answer, HeartbeatResponse)

    async def request_approval(self, request: RequestApprovalRequest) -> RequestApprovalResponse:
        return await self._call(Verb.REQUEST_APPROVAL, request, RequestApprovalResponse)

    async def report_status(self, request: ReportStatusRequest) -> Ack:
        return await self._call(Verb.REPORT_STATUS, request, Ack)

    async def terminate_self(self, request: TerminateSelfRequest) -> Ack:
        return await self._call(Verb.TERMINATE_SELF, request, Ack)

    async def fetch_dynamic_config(
        self, request: FetchDynamicConfigRequest
    ) -> FetchDynamicConfigResponse:
        return await self._call(Verb.FETCH_DYNAMIC_CONFIG, request, FetchDynamicConfigResponse)

    async def execute_host_tool(self, request: ExecuteHostToolRequest) -> ExecuteHostToolResponse:
        return await self._call(Verb.EXECUTE_HOST_TOOL, request, ExecuteHostToolResponse)

    async def put_artifact(self, request: PutArtifactRequest) -> PutArtifactResponse:
        return await self._call(Verb.PUT_ARTIFACT, request, PutArtifactResponse)

    async def fetch_artifact(self, request: FetchArtifactRequest) -> FetchArtifactResponse:
        return await self._call(Verb.FETCH_ARTIFACT, request, FetchArtifactResponse)

    async def fetch_events(self, request: FetchEventsRequest) -> FetchEventsResponse:
        return await self._call(Verb.FETCH_EVENTS, request, FetchEventsResponse)

    async def pushes(self, *, after_seq: int = 0) -> AsyncGenerator[PushEnvelope, None]:
        """The session's pushes from choird (user messages, injections, cancels, config…)."""
        async for item in self._client.pushes(after_seq=after_seq):
            yield PushEnvelope.model_validate(item)

    async def close(self) -> None:
        await self._client.close()

    async def _call(self, verb: Verb, request: WireModel, response: type[ResponseT]) -> ResponseT:
        answer = await self._client.call(verb.value, request.model_dump(mode="json"))
        return _parsed(verb, answer, response)


def init_hello_answer(answer: Any) -> InitHelloResponse:
    """choird's INIT_HELLO answer, parsed: choir-agent sends its hello before it loads the wire
    models (`choir.agent.startup.say_hello`)."""
    return _parsed(Verb.INIT_HELLO, answer, InitHelloResponse)


def _parsed(verb: Verb, answer: Any, response: type[ResponseT]) -> ResponseT:
    try:
        return response.model_validate(answer)
    except ValidationError as exc:
        raise TransportError(f"choird sent a malformed {verb.value} answer: {exc}") from None


class ControlPlaneHostBridge:
    """The kernel's `HostBridge` over the control plane; a core job's calls carry its token."""

    def __init__(self, control_plane: ControlPlane, tokens: JobTokens | None = None) -> None:
        self._cp = control_plane
        self._tokens = tokens

    async def execute_host_tool(
        self, tool: str, call_id: str, arguments: dict[str, Any], *, lane: str = EDGE_LANE
    ) -> ToolResult:
        try:
            job = self._tokens.for_lane(lane) if self._tokens is not None else None
        except JobEnded:
            return ToolResult.fail(
                JOB_TOKEN_REFUSED, f"{tool}: the job of lane {lane} has ended; nothing was run"
            )
        answer = await self._cp.execute_host_tool(
            ExecuteHostToolRequest(tool_name=tool, call_id=call_id, input=arguments, job=job)
        )
        try:
            return ToolResult.model_validate(answer.output)
        except ValidationError:
            return ToolResult.fail(
                "invalid_host_output", f"choird returned a malformed result for {tool}"
            )

    async def request_approval(
        self, request_type: str, payload: dict[str, Any], *, lane: str = EDGE_LANE
    ) -> str:
        try:
            job = self._tokens.for_lane(lane) if self._tokens is not None else None
        except JobEnded:
            raise ConflictError(f"the job of lane {lane} has ended: nothing was proposed") from None
        kind = _APPROVAL_TYPES.get(request_type, request_type)
        request = RequestApprovalRequest.model_validate(
            {"request_type": kind, "payload": payload, "job": job}
        )
        answer = await self._cp.request_approval(request)
        return answer.approval_id
