"""Running one authenticated agent call, whatever the transport: payload in, payload out.

The listeners' `AgentHandler` checks the lease and hands over the caller's `SessionContext`;
`call` applies the session's rate limit and the payload cap, parses the verb's payload, runs the
verb and turns any refusal into the `RpcError` the transport answers with (§12.3) — code,
message and typed details, with no envelope in between. Refusals and failures are logged
throttled per session (`choir.logs.throttle`): an agent repeating a refused call costs a few
lines, not one per call.
"""

from __future__ import annotations

import logging

import orjson
from pydantic import ValidationError

from choir.daemon.agents.ratelimit import RateLimiter, check_payload_size
from choir.daemon.agents.refusals import RpcFault, database_down, rpc_error_of
from choir.daemon.agents.verbs import AgentVerbs
from choir.daemon.sessions.state import SessionContext
from choir.daemon.staging.stage import ConfigStage
from choir.errors import ChoirError
from choir.logs import get_logger
from choir.logs.throttle import ThrottledLog
from choir.protocol import ErrorCode, Verb, WireModel, parse_request_payload, validation_problems
from choir.transport import Payload, RpcError

log = get_logger("choird.rpc")


class AgentRpc:
    """Payload-level handling of the agent verbs, for an already authenticated caller."""

    def __init__(self, verbs: AgentVerbs, stage: ConfigStage, limiter: RateLimiter) -> None:
        self._verbs = verbs
        self._stage = stage
        self._limiter = limiter
        self._db_down = ThrottledLog(log, "agent call refused: database down")
        self._failed = ThrottledLog(log, "agent call failed", level=logging.ERROR)
        self._refused = ThrottledLog(log, "agent call refused")

    async def call(
        self, ctx: SessionContext, verb: Verb, payload: Payload, *, carried: int | None = None
    ) -> Payload:
        """The verb's answer payload; `RpcError` when refused. `carried` is the size of what
        carried the payload (`Request.size`) if the transport knows it."""
        try:
            response = await self._run(ctx, verb, payload, carried)
        except Exception as exc:
            raise self.refusal(exc, ctx.session_id, verb.value) from None
        return response.model_dump(mode="json")

    def refusal(self, exc: BaseException, session_id: str, verb: str) -> RpcError:
        """The wire error for `exc`, raised by a call of `verb` for `session_id`, logged; call
        it while handling `exc` (a failure is logged with its traceback)."""
        error = rpc_error_of(exc)
        if database_down(exc):
            self._db_down.emit(session_id, {"error": str(exc)})
        elif not isinstance(exc, ChoirError):
            self._failed.emit((session_id, verb), {"verb": verb}, exc_info=True)
        elif error.code == ErrorCode.UNAUTHORIZED:
            self._refused.emit((session_id, verb), {"verb": verb})
        details = error.details.model_dump(mode="json") if error.details is not None else None
        return RpcError(error.code, error.message, details)

    async def _run(
        self, ctx: SessionContext, verb: Verb, payload: Payload, carried: int | None
    ) -> WireModel:
        self._limiter.check(ctx.session_id)
        limit = self._stage.running.config.rpc.max_payload_bytes
        if carried is None or carried > limit:
            # Only then can the payload itself be over the cap: measure it exactly. A call that
            # arrived within the cap (every heartbeat) is not encoded again just to be measured.
            check_payload_size(len(orjson.dumps(payload)), limit)
        try:
            request = parse_request_payload(verb, payload)
        except ValidationError as err:
            problems = "; ".join(validation_problems(err))
            raise RpcFault(ErrorCode.INVALID_REQUEST, f"{verb.value} payload: {problems}") from None
        return await self._verbs.dispatch(ctx, verb, request)
