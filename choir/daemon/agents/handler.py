"""The transport `Handler` for agents: decoded requests in, `AgentRpc` envelopes through.

One instance serves each agent's own socket (`bound_agent` set: a container can only ever speak
for its own agent, so agent A's token on agent B's socket is refused), and one unbound instance
serves the HTTP listener, where the lease token alone identifies the session.

A refused call is logged, throttled per peer (`choir.logs.throttle`): an agent flooding its
socket with forged or stolen leases costs a few lines and a count, never one line per call.
"""

from __future__ import annotations

from pydantic import ValidationError

from choir.daemon.agents.rpc import AgentRpc
from choir.daemon.sessions.service import SessionService
from choir.errors import ChoirError
from choir.logs import get_logger
from choir.logs.throttle import ThrottledLog
from choir.protocol import ErrorCode, RequestEnvelope, Verb
from choir.transport import Payload, Request, RpcError, Stream
from choir.transport.dispatch import peer_key

log = get_logger("choird.agent_socket")

_VERBS = frozenset(v.value for v in Verb)


class AgentHandler:
    """Accepts only the 8 agent verbs, each with a valid lease for its session."""

    def __init__(
        self, rpc: AgentRpc, sessions: SessionService, *, bound_agent: str | None = None
    ) -> None:
        self._rpc = rpc
        self._sessions = sessions
        self._agent = bound_agent
        self._invalid = ThrottledLog(log, "refused a call with an invalid lease")
        self._foreign = ThrottledLog(log, "refused another agent's lease")

    async def handle(self, request: Request) -> Payload | Stream:
        if request.verb not in _VERBS:
            known = ", ".join(sorted(_VERBS))
            raise RpcError(ErrorCode.NOT_FOUND, f"unknown verb {request.verb!r} (known: {known})")
        await self._check_binding(request.session_id, request.lease_token, peer_key(request.peer))
        try:
            envelope = RequestEnvelope(
                request_id=request.request_id,
                session_id=request.session_id,
                lease_token=request.lease_token,
                verb=Verb(request.verb),
                payload=request.payload,
            )
        except ValidationError:
            raise RpcError(ErrorCode.INVALID_REQUEST, "malformed envelope") from None
        response = await self._rpc.handle(envelope)
        if response.error is not None:
            raise RpcError(response.error.code, response.error.message)
        return response.payload or {}

    async def authorize_events(self, session_id: str, lease_token: str) -> bool:
        try:
            await self._check_binding(session_id, lease_token)
        except ChoirError:
            return False
        return True

    async def _check_binding(self, session_id: str, lease_token: str, peer: str = "") -> None:
        """On an agent's own socket, the session must belong to that agent."""
        try:
            ctx = await self._sessions.authenticate(session_id, lease_token)
        except ChoirError:
            fields = {"agent": self._agent, "peer": peer}
            self._invalid.emit(peer, fields)
            raise RpcError(ErrorCode.UNAUTHORIZED, "invalid session or lease token") from None
        if self._agent is not None and ctx.agent_id != self._agent:
            fields = {"socket_agent": self._agent, "lease_agent": ctx.agent_id}
            self._foreign.emit((peer, ctx.agent_id), fields)
            raise RpcError(ErrorCode.UNAUTHORIZED, "this socket serves another agent")
