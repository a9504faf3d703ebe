"""The agent verbs, server side (§12.5, and the artifact and paging verbs beyond it): one method
per verb, transport-agnostic.

Each takes the caller's `SessionContext` (from an authenticated envelope) and the parsed request
payload, and returns the response payload; refusals raise `RpcFault` or a `ChoirError`, which
`rpc_error_of` maps to the wire. Nothing here knows whether the call came over a Unix socket
or HTTP (§12.3 rule 4).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from choir.daemon.agents.artifacts import ArtifactVerbs
from choir.daemon.agents.config_fetch import dynamic_config
from choir.daemon.agents.hello import Greeter
from choir.daemon.agents.host_tools import HostTools
from choir.daemon.agents.ingest import EventIngest
from choir.daemon.agents.refusals import RpcFault
from choir.daemon.agents.status_board import StatusBoard
from choir.daemon.approvals import ApprovalService
from choir.daemon.sessions.bindings import allowed_secrets
from choir.daemon.sessions.service import SessionService
from choir.daemon.sessions.state import Clock, SessionContext, failed_start, utc_now
from choir.daemon.staging.stage import ConfigStage
from choir.protocol import (
    Ack,
    ErrorCode,
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
    Verb,
    WireModel,
)


class AgentVerbs:
    """The server side of every agent verb, over choird's services."""

    def __init__(
        self,
        *,
        stage: ConfigStage,
        sessions: SessionService,
        greeter: Greeter,
        replicator: EventIngest,
        approvals: ApprovalService,
        host_tools: HostTools,
        status: StatusBoard,
        artifacts: ArtifactVerbs,
        clock: Clock = utc_now,
    ) -> None:
        self._stage = stage
        self._sessions = sessions
        self._greeter = greeter
        self._replicator = replicator
        self._approvals = approvals
        self._host_tools = host_tools
        self._status = status
        self._clock = clock
        self._table: Mapping[Verb, Callable[[SessionContext, Any], Awaitable[WireModel]]] = {
            Verb.INIT_HELLO: self.init_hello,
            Verb.GET_SECRETS: self.get_secrets,
            Verb.HEARTBEAT: self.heartbeat,
            Verb.REQUEST_APPROVAL: self.request_approval,
            Verb.REPORT_STATUS: self.report_status,
            Verb.TERMINATE_SELF: self.terminate_self,
            Verb.FETCH_DYNAMIC_CONFIG: self.fetch_dynamic_config,
            Verb.EXECUTE_HOST_TOOL: self.execute_host_tool,
            Verb.PUT_ARTIFACT: artifacts.put_artifact,
            Verb.FETCH_ARTIFACT: artifacts.fetch_artifact,
            Verb.FETCH_EVENTS: greeter.fetch_events,
        }

    async def dispatch(self, ctx: SessionContext, verb: Verb, request: WireModel) -> WireModel:
        """Run `verb`; `request` is the payload model `parse_request_payload(verb, …)` made."""
        return await self._table[verb](ctx, request)

    async def init_hello(self, ctx: SessionContext, request: InitHelloRequest) -> InitHelloResponse:
        return await self._greeter.init_hello(ctx, request)

    async def get_secrets(
        self, ctx: SessionContext, request: GetSecretsRequest
    ) -> GetSecretsResponse:
        """Only the secrets named by the session's bound resources (§14.2, §14.3)."""
        allowed = allowed_secrets(self._stage.running.config, ctx.bindings)
        refused = sorted(set(request.resources) - set(allowed))
        if refused:
            raise RpcFault(
                ErrorCode.INVALID_REQUEST,
                f"secret(s) {', '.join(refused)} are not bound to session {ctx.session_id} "
                f"(allowed: {', '.join(allowed) or 'none'})",
            )
        store = self._stage.secrets
        unset = sorted(name for name in request.resources if name not in store)
        if unset:
            raise RpcFault(
                ErrorCode.NOT_FOUND,
                f"secret(s) {', '.join(unset)} are not set: run choirctl secret set <name>, "
                "then choirctl secret apply",
            )
        return GetSecretsResponse(secrets={name: store.get(name) for name in request.resources})

    async def heartbeat(self, ctx: SessionContext, request: HeartbeatRequest) -> HeartbeatResponse:
        return await self._replicator.heartbeat(ctx, request)

    async def request_approval(
        self, ctx: SessionContext, request: RequestApprovalRequest
    ) -> RequestApprovalResponse:
        if request.job is not None:  # a job that ended proposes nothing more (§7.5(3))
            problem = await self._host_tools.jobs.problem(ctx, request.job)
            if problem is not None:
                raise RpcFault(ErrorCode.CONFLICT, f"{problem}: nothing was proposed")
        return await self._approvals.request(ctx, request)

    async def report_status(self, ctx: SessionContext, request: ReportStatusRequest) -> Ack:
        self._status.report(ctx.session_id, request, self._clock())
        return Ack()

    async def terminate_self(self, ctx: SessionContext, request: TerminateSelfRequest) -> Ack:
        """End the session: leases released, token revoked (this call is its last). An agent
        that could not start or resume ends it crashed, so it stays resumable."""
        if request.failed:
            reason = failed_start(ctx.live.resumed, request.reason)
            await self._sessions.mark_crashed(ctx.session_id, reason)
        else:
            await self._sessions.terminate(ctx.session_id, request.reason, request.summary)
        return Ack()

    async def fetch_dynamic_config(
        self, ctx: SessionContext, request: FetchDynamicConfigRequest
    ) -> FetchDynamicConfigResponse:
        running = self._stage.running
        if request.current_config_version == running.version:
            return FetchDynamicConfigResponse(config_version=running.version)
        blob = dynamic_config(running.config, ctx.bindings, ctx.agent_id)
        blob["host_unavailable"] = self._host_tools.unavailable()  # as of this fetch
        return FetchDynamicConfigResponse(config_version=running.version, config=blob)

    async def execute_host_tool(
        self, ctx: SessionContext, request: ExecuteHostToolRequest
    ) -> ExecuteHostToolResponse:
        return await self._host_tools.execute(ctx, request)
