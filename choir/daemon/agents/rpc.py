"""One entry point for every agent call, whatever the transport: envelope in, envelope out.

Both listeners (Unix socket frames and HTTP) decode a `RequestEnvelope` and call `handle`; it
authenticates the lease token, applies the session's rate limit and the payload cap, parses the
verb's payload, runs the verb and turns any refusal into an error response (§12.3). Refusals
and failures are logged throttled per session (`choir.logs.throttle`): an agent repeating a
refused call costs a few lines, not one per call.
"""

from __future__ import annotations

import logging

import orjson
from pydantic import ValidationError

from choir.daemon.agents.ratelimit import RateLimiter, check_payload_size
from choir.daemon.agents.refusals import RpcFault, database_down, rpc_error_of
from choir.daemon.agents.verbs import AgentVerbs
from choir.daemon.sessions.service import SessionService
from choir.daemon.staging.stage import ConfigStage
from choir.errors import ChoirError
from choir.logs import get_logger
from choir.logs.throttle import ThrottledLog
from choir.protocol import (
    ErrorCode,
    RequestEnvelope,
    ResponseEnvelope,
    WireModel,
    parse_request_payload,
    validation_problems,
)

log = get_logger("choird.rpc")


class AgentRpc:
    """Envelope-level handling of the 8 agent verbs."""

    def __init__(
        self,
        verbs: AgentVerbs,
        sessions: SessionService,
        stage: ConfigStage,
        limiter: RateLimiter,
    ) -> None:
        self._verbs = verbs
        self._sessions = sessions
        self._stage = stage
        self._limiter = limiter
        self._db_down = ThrottledLog(log, "agent call refused: database down")
        self._failed = ThrottledLog(log, "agent call failed", level=logging.ERROR)
        self._refused = ThrottledLog(log, "agent call refused")

    async def handle(
        self, envelope: RequestEnvelope, *, payload_bytes: int | None = None
    ) -> ResponseEnvelope:
        """Answer one call. `payload_bytes` is the payload's encoded size if the transport
        knows it; otherwise it is measured here."""
        try:
            response = await self._call(envelope, payload_bytes)
        except Exception as exc:
            error = rpc_error_of(exc)
            session, verb = envelope.session_id, envelope.verb.value
            if database_down(exc):
                self._db_down.emit(session, {"error": str(exc)})
            elif not isinstance(exc, ChoirError):
                self._failed.emit((session, verb), {"verb": verb}, exc_info=True)
            elif error.code == ErrorCode.UNAUTHORIZED:
                self._refused.emit((session, verb), {"verb": verb})
            return ResponseEnvelope.failure(envelope.request_id, error.code, error.message)
        return ResponseEnvelope.success(envelope.request_id, response)

    async def _call(self, envelope: RequestEnvelope, payload_bytes: int | None) -> WireModel:
        ctx = await self._sessions.authenticate(envelope.session_id, envelope.lease_token)
        self._limiter.check(ctx.session_id)
        size = payload_bytes if payload_bytes is not None else len(orjson.dumps(envelope.payload))
        check_payload_size(size, self._stage.running.config.rpc.max_payload_bytes)
        try:
            request = parse_request_payload(envelope.verb, envelope.payload)
        except ValidationError as err:
            problems = "; ".join(validation_problems(err))
            raise RpcFault(
                ErrorCode.INVALID_REQUEST, f"{envelope.verb.value} payload: {problems}"
            ) from None
        return await self._verbs.dispatch(ctx, envelope.verb, request)
