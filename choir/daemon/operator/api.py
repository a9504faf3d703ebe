"""choird's operator API: the verbs choirctl, the TUI and the gateway call (§17.1, §19.3).

Served on `$CHOIR_HOME/socks/choird.sock` (mode 0600, never mounted into a container; design
notes "Sockets and security") by a `UdsServer` with this handler. Verbs are dotted strings
(`session.events`); payloads are JSON objects validated per verb; refusals are `RpcError`s with
one-line messages naming the fix. The verbs themselves live one noun per `operator_*` module.

    api = OperatorApi(services, pool, push=lambda sid, push: hub.push(sid, push.model_dump(...)))
    async with UdsServer(home.operator_socket, api, owner="choird"):
        ...
    api.close()

The daemon builds it with `operator_handler(daemon)` (`ChoirDaemon(options, operator=…)`).
"""

from __future__ import annotations

import os
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

from pydantic import ValidationError

from choir.daemon.agents.refusals import rpc_error_of
from choir.daemon.agents.services import AgentServices
from choir.daemon.gateway.commands import DmCommands
from choir.daemon.gateway.console import ConsoleDm, PushFn
from choir.daemon.health.board import DaemonHealth
from choir.daemon.operator import approvals as operator_approvals
from choir.daemon.operator import chat as operator_chat
from choir.daemon.operator import config as operator_config
from choir.daemon.operator import events as operator_events
from choir.daemon.operator import logs as operator_logs
from choir.daemon.operator import payloads as p
from choir.daemon.operator import recover as operator_recover
from choir.daemon.operator import sessions as operator_sessions
from choir.daemon.operator import status as operator_status
from choir.daemon.operator import workspaces as operator_workspaces
from choir.daemon.operator.agents import build as operator_build
from choir.daemon.operator.agents import lifecycle as operator_lifecycle
from choir.daemon.operator.agents import models as operator_models
from choir.daemon.operator.agents import update as operator_update
from choir.daemon.operator.agents import verify as operator_verify
from choir.daemon.operator.agents.launches import Lifecycle
from choir.daemon.operator.context import OperatorContext
from choir.daemon.operator.feed import OperatorFeed
from choir.daemon.sessions.state import Clock, utc_now
from choir.errors import ChoirError
from choir.protocol import ErrorCode, WireModel, validation_problems
from choir.store.postgres.failures import classify
from choir.store.postgres.pool import Pool
from choir.transport import Payload, Request, RpcError, Stream

if TYPE_CHECKING:
    from choir.daemon.app import ChoirDaemon

Answer = dict[str, Any] | AsyncIterator[Payload]


@dataclass(frozen=True)
class Route:
    """How a verb's payload is parsed and who answers it."""

    payload: type[WireModel]
    run: Callable[[OperatorContext, Any], Awaitable[Answer]]


async def _session_events(ctx: OperatorContext, request: p.SessionEvents) -> Answer:
    if request.follow:
        return await operator_events.follow_events(ctx, request)
    return await operator_events.session_events(ctx, request)


async def _subscribe(ctx: OperatorContext, _: p.NoArguments) -> Answer:
    return ctx.feed.items(ctx.stage.running.version)


VERBS: Final[Mapping[str, Route]] = {
    "status": Route(p.NoArguments, operator_status.status),
    "agent.list": Route(p.NoArguments, operator_status.agent_list),
    "agent.status": Route(p.AgentRef, operator_status.agent_status),
    "agent.start": Route(operator_lifecycle.AgentStart, operator_lifecycle.agent_start),
    "agent.stop": Route(p.AgentRef, operator_lifecycle.agent_stop),
    "agent.verify": Route(p.AgentRef, operator_verify.agent_verify),
    "agent.restart": Route(p.AgentRef, operator_lifecycle.agent_restart),
    "agent.build": Route(p.AgentRef, operator_build.agent_build),
    "agent.update": Route(p.AgentRef, operator_update.agent_update),
    "agent.update_all": Route(p.NoArguments, operator_update.agent_update_all),
    "shutdown": Route(p.NoArguments, operator_lifecycle.choird_shutdown),
    "session.list": Route(p.SessionList, operator_sessions.session_list),
    "session.events": Route(p.SessionEvents, _session_events),
    "session.artifact": Route(operator_events.SessionArtifact, operator_events.session_artifact),
    "session.cores": Route(p.SessionRef, operator_sessions.session_cores),
    "session.locks": Route(p.SessionRef, operator_sessions.session_locks),
    "session.cancel": Route(p.SessionCancel, operator_sessions.session_cancel),
    "session.compact": Route(p.SessionCompact, operator_sessions.session_compact),
    "session.recover": Route(operator_recover.SessionRecover, operator_recover.session_recover),
    "approval.list": Route(p.ApprovalList, operator_approvals.approval_list),
    "approval.show": Route(p.ApprovalRef, operator_approvals.approval_show),
    "approval.approve": Route(p.ApprovalAnswer, operator_approvals.approval_approve),
    "approval.reject": Route(p.ApprovalAnswer, operator_approvals.approval_reject),
    "workspace.list": Route(p.NoArguments, operator_workspaces.workspace_list),
    "workspace.reset": Route(p.WorkspaceRef, operator_workspaces.workspace_reset),
    "model.list": Route(p.NoArguments, operator_models.model_list),
    "model.get": Route(p.AgentRef, operator_models.model_get),
    "model.set": Route(p.ModelSet, operator_models.model_set),
    "voice.list": Route(p.NoArguments, operator_models.voice_list),
    "voice.get": Route(p.AgentRef, operator_models.voice_get),
    "voice.set": Route(p.VoiceSet, operator_models.voice_set),
    "logs": Route(p.LogsRequest, operator_logs.logs),
    "secret.list": Route(p.NoArguments, operator_config.secret_list),
    "secret.apply": Route(p.NoArguments, operator_config.secret_apply),
    "config.load": Route(p.NoArguments, operator_config.config_load),
    "config.diff": Route(p.NoArguments, operator_config.config_diff),
    "config.apply": Route(p.NoArguments, operator_config.config_apply),
    "config.show": Route(p.NoArguments, operator_config.config_show),
    "subscribe": Route(p.NoArguments, _subscribe),
    "chat.send": Route(operator_chat.ChatSend, operator_chat.chat_send),
    "chat.replies": Route(operator_chat.ChatReplies, operator_chat.chat_replies),
}
"""Every operator verb. `session.events` (with follow), `logs`, `subscribe`, `agent.build`,
`agent.update` and `agent.update_all` stream."""


class OperatorApi:
    """The `Handler` of the operator socket, over choird's services.

    `push(session_id, push_model)` sends a ServerPush to a session's agent (the daemon's
    PushHub). `close()` detaches the live feed from the services; without it the feed just
    keeps fanning out to no readers until the services are gone.
    """

    def __init__(
        self,
        services: AgentServices,
        pool: Pool,
        *,
        push: PushFn,
        clock: Clock = utc_now,
        started_at: datetime | None = None,
        feed: OperatorFeed | None = None,
        lifecycle: Lifecycle | None = None,
        health: DaemonHealth | None = None,
    ) -> None:
        feed = feed if feed is not None else OperatorFeed()
        health = health if health is not None else DaemonHealth()

        async def call(verb: str, payload: Payload) -> Answer:
            return await call_verb(self.context, verb, payload)

        self.context = OperatorContext(
            services,
            pool,
            push,
            feed,
            clock,
            started_at if started_at else clock(),
            console=ConsoleDm(DmCommands(call)),  # a DM's commands run the verbs in-process
            lifecycle=lifecycle,
            health=health,
        )
        """What the verbs work with."""
        detach_feed = feed.attach(services)
        detach_console = self.context.console.attach(services.replicator.subscribe)
        detach_inbox = self.context.console.attach_inbox(services.inbox)
        detach_health = health.subscribe(lambda view: feed.publish("health", view))

        def detach() -> None:
            detach_feed()
            detach_console()
            detach_inbox()
            detach_health()

        self._detach = detach

    @property
    def feed(self) -> OperatorFeed:
        """Where choird publishes what `subscribe` streams show (e.g. a session starting)."""
        return self.context.feed

    def close(self) -> None:
        """Stop listening to the services and the DM commands still running."""
        self._detach()
        self.context.console.close()

    async def handle(self, request: Request) -> Payload | Stream:
        _check_peer(request)
        route = VERBS.get(request.verb)
        if route is None:
            raise RpcError(
                ErrorCode.INVALID_REQUEST,
                f"unknown operator verb {request.verb!r}: is choirctl the same version as "
                f"choird? (known: {', '.join(sorted(VERBS))})",
            )
        payload = _parse(request.verb, route.payload, request.payload)
        try:
            answer = await route.run(self.context, payload)
        except ChoirError as error:
            raise as_rpc_error(error) from None
        except Exception as error:
            raise unavailable_store(error) from None
        if isinstance(answer, dict):
            return answer
        return Stream(_translated(answer))

    async def authorize_events(self, session_id: str, lease_token: str) -> bool:
        """Pushes are for agents; nobody subscribes to them on the operator socket."""
        return False


async def call_verb(ctx: OperatorContext, verb: str, payload: Payload) -> Answer:
    """Run one verb in-process, its payload validated as on the socket (a DM's commands)."""
    route = VERBS[verb]
    return await route.run(ctx, _parse(verb, route.payload, payload))


def operator_handler(daemon: ChoirDaemon) -> OperatorApi:
    """The operator socket's handler over a started daemon's services, pushing via its hub."""
    services, database, hub = daemon.services, daemon.database, daemon.hub
    if services is None or database is None:
        raise RuntimeError("the operator API needs choird's services and database started")

    def push(session_id: str, message: WireModel) -> None:
        hub.push(session_id, message.model_dump(mode="json"))

    lifecycle = None
    if daemon.runtime is not None:
        lifecycle = Lifecycle(daemon.runtime, daemon.open_agent_socket, shutdown=daemon.stop)
    return OperatorApi(
        services, database.pool, push=push, lifecycle=lifecycle, health=daemon.health
    )


def as_rpc_error(error: ChoirError) -> RpcError:
    """The wire refusal for an operator-facing error: same one-line message, matching code."""
    if isinstance(error, RpcError):
        return error
    wire = rpc_error_of(error)
    return RpcError(wire.code, wire.message)


STORE_UNAVAILABLE = {
    "down": "choird's database is not answering (choird restarts an embedded server by "
    "itself): nothing was changed; retry in a few seconds, choirctl status shows its state",
    "disk_full": "choird's database could not write: the disk is full; nothing was "
    "changed — free space under $CHOIR_HOME (choirctl status names the file system)",
    "io_error": "choird's database could not write: an I/O error on its disk; nothing was "
    "changed — check the disk (choirctl status, choirctl logs choird)",
}
"""One line per kind of store failure (`choir.store.postgres.failures`), the fix included."""


def unavailable_store(error: Exception) -> Exception:
    """`unavailable` (exit 6) for a database that is away or whose disk fails; `error` itself
    for anything else (a bug: the transport answers `internal`)."""
    kind = classify(error)
    if kind is None:
        return error
    return RpcError(ErrorCode.UNAVAILABLE, STORE_UNAVAILABLE[kind])


def _check_peer(request: Request) -> None:
    """Only the user running choird (or root) may talk to it; the 0600 socket should already
    make sure, this is the second lock."""
    uid = request.peer.uid
    if uid is not None and uid not in (os.getuid(), 0):
        raise RpcError(
            ErrorCode.UNAUTHORIZED,
            f"uid {uid} may not use choird's operator socket: run choirctl as the user "
            "running choird",
        )


def _parse(verb: str, model: type[WireModel], payload: Payload) -> WireModel:
    try:
        return model.model_validate(payload)
    except ValidationError as error:
        problems = "; ".join(validation_problems(error))
        raise RpcError(ErrorCode.INVALID_REQUEST, f"{verb}: {problems}") from None


async def _translated(items: AsyncIterator[Payload]) -> AsyncGenerator[Payload, None]:
    """`items`, with operator-facing errors turned into wire refusals; closes `items`."""
    try:
        async for item in items:
            yield item
    except ChoirError as error:
        raise as_rpc_error(error) from None
    except Exception as error:
        raise unavailable_store(error) from None
    finally:
        close = getattr(items, "aclose", None)
        if close is not None:
            await close()
