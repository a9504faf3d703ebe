"""The transport `Handler` for agents: the one place an agent call is authenticated.

Each call's lease token is checked once, here (`SessionService.authenticate`, constant time),
and the `SessionContext` found — the session's live state — goes with the call to `AgentRpc`
and the verb, which never check the token or look the session up again.

One instance serves each agent's own socket (`bound_agent` set: a container can only ever speak
for its own agent, so agent A's token on agent B's socket is refused), and one unbound instance
serves the HTTP listener, where the lease token alone identifies the session.

A refused call is logged, throttled per peer (`choir.logs.throttle`): an agent flooding its
socket with forged or stolen leases costs a few lines and a count, never one line per call.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from choir.daemon.agents.refusals import RpcFault
from choir.daemon.agents.rpc import AgentRpc
from choir.daemon.sessions.service import SessionService
from choir.daemon.sessions.state import SessionContext
from choir.logs import get_logger
from choir.logs.throttle import ThrottledLog
from choir.protocol import ErrorCode, Verb
from choir.transport import Payload, Request, RpcError, Stream
from choir.transport.dispatch import peer_key

log = get_logger("choird.agent_socket")

_VERBS = {v.value: v for v in Verb}
SOCKET_LINK: Final = "unix socket"


class AgentHandler:
    """Accepts only the agent verbs, each with a valid lease for its session."""

    def __init__(
        self,
        rpc: AgentRpc,
        sessions: SessionService,
        *,
        bound_agent: str | None = None,
        link: Callable[[], str] = lambda: SOCKET_LINK,
    ) -> None:
        self._rpc = rpc
        self._sessions = sessions
        self._agent = bound_agent
        self._link = link
        """What this listener is, as `agent status` names an agent's link."""
        self._invalid = ThrottledLog(log, "refused a call with an invalid lease")
        self._foreign = ThrottledLog(log, "refused another agent's lease")

    async def handle(self, request: Request) -> Payload | Stream:
        verb = _VERBS.get(request.verb)
        if verb is None:
            known = ", ".join(sorted(_VERBS))
            raise RpcError(ErrorCode.NOT_FOUND, f"unknown verb {request.verb!r} (known: {known})")
        peer = peer_key(request.peer)
        ctx = await self._authenticate(request.session_id, request.lease_token, verb.value, peer)
        ctx.live.link = self._link()
        return await self._rpc.call(ctx, verb, request.payload, carried=request.size)

    async def authorize_events(self, session_id: str, lease_token: str) -> bool:
        try:
            await self._authenticate(session_id, lease_token, "events")
        except RpcError as refused:
            if refused.code == ErrorCode.UNAUTHORIZED:
                return False
            raise
        return True

    async def _authenticate(
        self, session_id: str, lease_token: str, verb: str, peer: str = ""
    ) -> SessionContext:
        """The caller's context if `lease_token` is its session's lease and, on an agent's own
        socket, the session is that agent's; `RpcError` otherwise (`unavailable` when choird
        cannot tell, e.g. its database is down while it loads the session)."""
        try:
            ctx = await self._sessions.authenticate(session_id, lease_token)
        except RpcFault as fault:
            if fault.code != ErrorCode.UNAUTHORIZED:
                raise self._rpc.refusal(fault, session_id, verb) from None
            self._invalid.emit(peer, {"agent": self._agent, "peer": peer})
            raise RpcError(fault.code, fault.message) from None
        except Exception as exc:
            raise self._rpc.refusal(exc, session_id, verb) from None
        if self._agent is not None and ctx.agent_id != self._agent:
            fields = {"socket_agent": self._agent, "lease_agent": ctx.agent_id}
            self._foreign.emit((peer, ctx.agent_id), fields)
            raise RpcError(ErrorCode.UNAUTHORIZED, "this socket serves another agent")
        return ctx
