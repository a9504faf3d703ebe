"""choird's operator API: the verbs choirctl, the TUI and the gateway call (§17.1, §19.3).

Served on `$CHOIR_HOME/socks/choird.sock` (mode 0600, never mounted into a container; design
notes "Sockets and security") by a `UdsServer` with this handler. The verbs and their models
are the contract in `choir.protocol.operator`; payloads are validated per verb; refusals are
`RpcError`s with one-line messages naming the fix. The verbs themselves live one noun per module
of `choir.daemon.operator`.

    api = OperatorApi(services, pool, push=lambda sid, push: hub.push(sid, push.model_dump(...)))
    async with UdsServer(home.operator_socket, api, owner="choird"):
        ...
    api.close()

The daemon builds it with `operator_handler(daemon)` (`ChoirDaemon(options, operator=…)`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

from pydantic import ValidationError

from choir.config import ConsoleGateway
from choir.daemon.agents.refusals import rpc_error_of
from choir.daemon.agents.services import AgentServices
from choir.daemon.gateway.commands import DmCommands
from choir.daemon.gateway.console import ConsoleDm, PushFn
from choir.daemon.gateway.held import GatewayNews
from choir.daemon.health.board import DaemonHealth
from choir.daemon.operator import chat as operator_chat
from choir.daemon.operator import config as operator_config
from choir.daemon.operator import events as operator_events
from choir.daemon.operator import gateways as operator_gateways
from choir.daemon.operator import logs as operator_logs
from choir.daemon.operator import sessions as operator_sessions
from choir.daemon.operator import status as operator_status
from choir.daemon.operator import tools as operator_tools
from choir.daemon.operator import usage as operator_usage
from choir.daemon.operator import workspaces as operator_workspaces
from choir.daemon.operator.agents import build as operator_build
from choir.daemon.operator.agents import lifecycle as operator_lifecycle
from choir.daemon.operator.agents import models as operator_models
from choir.daemon.operator.agents import rollback as operator_rollback
from choir.daemon.operator.agents import update as operator_update
from choir.daemon.operator.agents import verify as operator_verify
from choir.daemon.operator.agents.launches import Lifecycle, SelfRestart
from choir.daemon.operator.approvals import verbs as operator_approvals
from choir.daemon.operator.approvals.config_change import apply_config_change
from choir.daemon.operator.approvals.edges import OperatorApplyEdges
from choir.daemon.operator.context import OperatorContext
from choir.daemon.operator.feed import OperatorFeed
from choir.daemon.operator.memory import curation as operator_curation
from choir.daemon.operator.memory import expand as operator_knowledge_expand
from choir.daemon.operator.memory import graph as operator_knowledge_graph
from choir.daemon.operator.memory import knowledge as operator_knowledge
from choir.daemon.operator.memory import reembed as operator_reembed
from choir.daemon.operator.memory import session_messages as operator_session_messages
from choir.daemon.operator.memory import source as operator_knowledge_source
from choir.daemon.operator.memory import tool_backfill as operator_tool_backfill
from choir.daemon.operator.memory import views as operator_memory
from choir.daemon.operator.memory.access import IN_A_DM
from choir.daemon.operator.recovery import inbox as operator_recovery_inbox
from choir.daemon.operator.recovery import recover as operator_recover
from choir.daemon.operator.recovery.start import note_restart, tell_admins
from choir.daemon.proposals.executor import ProposalApplier
from choir.daemon.sessions.state import Clock, utc_now
from choir.errors import ChoirError
from choir.protocol import ErrorCode, WireModel, validation_problems
from choir.protocol.operator import requests as r
from choir.protocol.operator.contract import OPERATOR_MODELS
from choir.protocol.operator.items import HealthItem, HealthView
from choir.protocol.operator.verbs import OperatorVerb
from choir.store.postgres.failures import classify
from choir.store.postgres.pool import Pool
from choir.transport import Payload, Request, RpcError, Stream

if TYPE_CHECKING:
    from choir.daemon.app import ChoirDaemon
    from choir.daemon.memory.closing.tool_rows import ToolRowBackfill
    from choir.daemon.memory.embedding.service import MemoryService
    from choir.daemon.memory.embedding.vector_models import VectorModels
    from choir.daemon.memory.reembed import Reembedder
    from choir.daemon.memory.store import MemoryStore

Answer = WireModel | AsyncIterator[WireModel]
"""A verb's answer, or the items it streams; serialized here, once, as JSON."""


@dataclass(frozen=True)
class Route:
    """Who answers a verb; its payload model comes from `OPERATOR_MODELS`."""

    run: Callable[[OperatorContext, Any], Awaitable[Answer]]


async def _session_events(ctx: OperatorContext, request: r.SessionEvents) -> Answer:
    if request.follow:
        return await operator_events.follow_events(ctx, request)
    return await operator_events.session_events(ctx, request)


async def _subscribe(ctx: OperatorContext, _: r.NoArguments) -> Answer:
    return ctx.feed.items(ctx.stage.running.version)


V = OperatorVerb
VERBS: Final[Mapping[OperatorVerb, Route]] = {
    V.STATUS: Route(operator_status.status),
    V.AGENT_LIST: Route(operator_status.agent_list),
    V.AGENT_STATUS: Route(operator_status.agent_status),
    V.AGENT_START: Route(operator_lifecycle.agent_start),
    V.AGENT_STOP: Route(operator_lifecycle.agent_stop),
    V.AGENT_VERIFY: Route(operator_verify.agent_verify),
    V.AGENT_RESTART: Route(operator_lifecycle.agent_restart),
    V.AGENT_BUILD: Route(operator_build.agent_build),
    V.AGENT_UPDATE: Route(operator_update.agent_update),
    V.AGENT_UPDATE_ALL: Route(operator_update.agent_update_all),
    V.AGENT_ROLLBACK: Route(operator_rollback.agent_rollback),
    V.SHUTDOWN: Route(operator_lifecycle.choird_shutdown),
    V.CHOIRD_RESTART: Route(operator_lifecycle.choird_restart),
    V.SESSION_LIST: Route(operator_sessions.session_list),
    V.SESSION_EVENTS: Route(_session_events),
    V.SESSION_ARTIFACT: Route(operator_events.session_artifact),
    V.SESSION_CORES: Route(operator_sessions.session_cores),
    V.SESSION_LOCKS: Route(operator_sessions.session_locks),
    V.SESSION_CANCEL: Route(operator_sessions.session_cancel),
    V.SESSION_COMPACT: Route(operator_sessions.session_compact),
    V.SESSION_RECOVER: Route(operator_recover.session_recover),
    V.APPROVAL_LIST: Route(operator_approvals.approval_list),
    V.APPROVAL_SHOW: Route(operator_approvals.approval_show),
    V.APPROVAL_APPROVE: Route(operator_approvals.approval_approve),
    V.APPROVAL_REJECT: Route(operator_approvals.approval_reject),
    V.APPROVAL_EXTEND: Route(operator_approvals.approval_extend),
    V.TOOL_REGISTER: Route(operator_tools.tool_register),
    V.WORKSPACE_LIST: Route(operator_workspaces.workspace_list),
    V.WORKSPACE_RESET: Route(operator_workspaces.workspace_reset),
    V.MODEL_LIST: Route(operator_models.model_list),
    V.MODEL_GET: Route(operator_models.model_get),
    V.MODEL_SET: Route(operator_models.model_set),
    V.VOICE_LIST: Route(operator_models.voice_list),
    V.VOICE_GET: Route(operator_models.voice_get),
    V.VOICE_SET: Route(operator_models.voice_set),
    V.LOGS: Route(operator_logs.logs),
    V.SECRET_LIST: Route(operator_config.secret_list),
    V.SECRET_APPLY: Route(operator_config.secret_apply),
    V.CONFIG_LOAD: Route(operator_config.config_load),
    V.CONFIG_DIFF: Route(operator_config.config_diff),
    V.CONFIG_APPLY: Route(operator_config.config_apply),
    V.CONFIG_SHOW: Route(operator_config.config_show),
    V.SUBSCRIBE: Route(_subscribe),
    V.CHAT_SEND: Route(operator_chat.chat_send),
    V.CHAT_REPLIES: Route(operator_chat.chat_replies),
    V.MEMORY_SEARCH: Route(operator_memory.memory_search),
    V.MEMORY_SHOW: Route(operator_memory.memory_show),
    V.MEMORY_STATS: Route(operator_memory.memory_stats),
    V.KNOWLEDGE_LIST: Route(operator_memory.knowledge_list),
    V.KNOWLEDGE_SHOW: Route(operator_memory.knowledge_show),
    V.KNOWLEDGE_PUT: Route(operator_memory.knowledge_put),
    V.KNOWLEDGE_DELETE: Route(operator_memory.knowledge_delete),
    V.KNOWLEDGE_ADD: Route(operator_knowledge.knowledge_add),
    V.KNOWLEDGE_WRITE: Route(operator_knowledge.knowledge_write),
    V.KNOWLEDGE_RENAME: Route(operator_knowledge.knowledge_rename),
    V.KNOWLEDGE_ALIAS: Route(operator_knowledge.knowledge_alias),
    V.KNOWLEDGE_HISTORY: Route(operator_knowledge.knowledge_history),
    V.KNOWLEDGE_RESTORE: Route(operator_knowledge.knowledge_restore),
    V.KNOWLEDGE_LINK: Route(operator_knowledge_graph.knowledge_link),
    V.KNOWLEDGE_UNLINK: Route(operator_knowledge_graph.knowledge_unlink),
    V.KNOWLEDGE_SOURCE: Route(operator_knowledge_source.knowledge_source),
    V.KNOWLEDGE_EXPAND: Route(operator_knowledge_expand.knowledge_expand),
    V.MEMORY_ABOUT: Route(operator_curation.memory_about),
    V.MEMORY_FORGET: Route(operator_curation.memory_forget),
    V.MEMORY_REEMBED: Route(operator_reembed.memory_reembed),
    V.MEMORY_BACKFILL_TOOLS: Route(operator_tool_backfill.memory_backfill_tools),
    V.SESSION_MESSAGES: Route(operator_session_messages.session_messages),
    V.GATEWAY_STATUS: Route(operator_gateways.gateway_status),
    V.SESSION_INJECT: Route(operator_sessions.session_inject),
    V.USAGE: Route(operator_usage.usage),
    V.INBOX_LIST: Route(operator_recovery_inbox.inbox_list),
    V.INBOX_RESOLVE: Route(operator_recovery_inbox.inbox_resolve),
}
"""Who answers every operator verb. `session.events` (with follow), `logs`, `subscribe`,
`agent.build`, `agent.update`, `agent.update_all`, `agent.rollback`, `chat.replies` and
`memory.reembed` and `memory.backfill_tools` stream."""


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
        memory_store: Callable[[], MemoryStore | None] | None = None,
        memory: MemoryService | None = None,
        reembedder: Callable[[], Awaitable[Reembedder | None]] | None = None,
        vector_models: VectorModels | None = None,
        tool_backfill: Callable[[], Awaitable[ToolRowBackfill | None]] | None = None,
        news: GatewayNews | None = None,
    ) -> None:
        feed = feed if feed is not None else OperatorFeed()
        health = health if health is not None else DaemonHealth()

        async def call(verb: str, payload: Payload) -> Payload | AsyncIterator[Payload]:
            """A DM's verb (console DM, Telegram): encrypted items stay unopened for it."""
            in_a_dm = IN_A_DM.set(True)
            try:
                return await call_verb(self.context, verb, payload)
            finally:
                IN_A_DM.reset(in_a_dm)

        self._call = call
        applier = ProposalApplier(
            pool,
            OperatorApplyEdges(lambda: self.context),
            lambda row, _: services.approvals.finish(row),
            clock=clock,
            config=lambda row, note: apply_config_change(self.context, row, note),
            progress=services.approvals.progressed,
        )

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
            memory_store=memory_store or (lambda: None),
            memory=memory,
            reembedder=reembedder,
            vector_models=vector_models,
            tool_backfill=tool_backfill,
            proposals=applier,
            news=news,
        )
        """What the verbs work with."""
        detach_feed = feed.attach(services)
        # the replies adopted agents replicate before this (step 6 on) reach the console too
        detach_console = self.context.console.attach(
            (news.replicated if news else services.replicator).subscribe
        )
        detach_inbox = self.context.console.attach_inbox(services.inbox)
        detach_health = health.subscribe(
            lambda view: feed.publish(HealthItem(data=HealthView.model_validate(view)))
        )

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

    async def start_gateways(self, stack: AsyncExitStack) -> list[str]:
        """Start the Telegram bots, whose DMs' commands run these verbs in-process (closed by
        `stack`); the names of the bots started."""
        from choir.daemon.gateway.telegram.start import start_telegram

        await note_restart(self.context)  # before the timers: the sweep times approvals out
        assert self.context.proposals is not None
        stack.push_async_callback(self.context.proposals.close)
        await self.context.proposals.resume_all()  # what a choird killed mid-apply left
        bots = await start_telegram(self.context, self._call, stack)
        notice = asyncio.create_task(
            tell_admins(self.context, [*self.context.admin_notices, self._console_notice]),
            name="recovery-notice",
        )
        stack.push_async_callback(_cancelled, notice)
        return bots

    def _console_notice(self, text: str) -> None:
        """The restart notice in the console chat of every agent, if a console DM is admin."""
        config = self.context.config
        consoles = [
            dm
            for dm in config.dms.values()
            if dm.admin and isinstance(config.gateways.get(dm.gateway), ConsoleGateway)
        ]
        if consoles:
            self.context.console.notice(sorted(config.agents), text)

    def close(self) -> None:
        """Stop listening to the services and the DM commands still running."""
        self._detach()
        self.context.console.close()

    async def handle(self, request: Request) -> Payload | Stream:
        _check_peer(request)
        verb = _verb(request.verb)
        if verb is None:
            raise RpcError(
                ErrorCode.INVALID_REQUEST,
                f"unknown operator verb {request.verb!r}: is choirctl the same version as "
                f"choird? (known: {', '.join(sorted(VERBS))})",
            )
        payload = _parse(verb, OPERATOR_MODELS[verb].request, request.payload)
        try:
            answer = await VERBS[verb].run(self.context, payload)
        except ChoirError as error:
            raise as_rpc_error(error) from None
        except Exception as error:
            raise unavailable_store(error) from None
        if isinstance(answer, WireModel):
            return answer.model_dump(mode="json")
        return Stream(_translated(answer))

    async def authorize_events(self, session_id: str, lease_token: str) -> bool:
        """Pushes are for agents; nobody subscribes to them on the operator socket."""
        return False


async def call_verb(
    ctx: OperatorContext, verb: str, payload: Payload
) -> Payload | AsyncIterator[Payload]:
    """Run one verb in-process, its payload validated and its answer in JSON form as on the
    socket (a DM's commands render that JSON as text)."""
    known = _verb(verb)
    if known is None:
        raise RpcError(ErrorCode.INVALID_REQUEST, f"unknown operator verb {verb!r}")
    request = _parse(known, OPERATOR_MODELS[known].request, payload)
    answer = await VERBS[known].run(ctx, request)
    if isinstance(answer, WireModel):
        return answer.model_dump(mode="json")
    return _translated(answer)


async def _cancelled(task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


def operator_handler(daemon: ChoirDaemon) -> OperatorApi:
    """The operator socket's handler over a started daemon's services, pushing via its hub."""
    services, database, hub = daemon.services, daemon.database, daemon.hub
    if services is None or database is None:
        raise RuntimeError("the operator API needs choird's services and database started")

    def push(session_id: str, message: WireModel) -> None:
        hub.push(session_id, message.model_dump(mode="json"))

    lifecycle = None
    if daemon.runtime is not None:
        restart = SelfRestart(daemon.restart_refusal, daemon.begin_restart)
        lifecycle = Lifecycle(
            daemon.runtime, daemon.open_agent_socket, shutdown=daemon.stop, restart=restart
        )
    return OperatorApi(
        services,
        database.pool,
        push=push,
        lifecycle=lifecycle,
        health=daemon.health,
        memory_store=lambda: memory_store_of(daemon),
        memory=daemon.memory,
        reembedder=daemon.reembedder,
        vector_models=daemon.vector_models,
        tool_backfill=daemon.tool_backfill,
        news=daemon.gateway_news,
    )


def memory_store_of(daemon: ChoirDaemon) -> MemoryStore | None:
    """The daemon's memory store, built on first use (numpy and pgvector load with it, not
    with choird's start); None before its database is up."""
    if daemon.memory_store is None and daemon.database is not None:
        from choir.core.memory.knowledge.relevance import RelevanceWeights
        from choir.daemon.memory.store import PostgresMemoryStore

        services = daemon.services
        daemon.memory_store = PostgresMemoryStore(
            daemon.database.pool,
            models=daemon.vector_models,
            weights=lambda: (
                services.stage.running.config.relevance.weights()
                if services is not None
                else RelevanceWeights()
            ),
        )
    return daemon.memory_store


def as_rpc_error(error: ChoirError) -> RpcError:
    """The wire refusal for an operator-facing error, translated as the agent socket does it
    (`rpc_error_of`); an `RpcError` goes out as raised, whatever it carries."""
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


def _verb(name: str) -> OperatorVerb | None:
    try:
        return OperatorVerb(name)
    except ValueError:
        return None


def _parse(verb: str, model: type[WireModel], payload: Payload) -> WireModel:
    try:
        return model.model_validate(payload)
    except ValidationError as error:
        problems = "; ".join(validation_problems(error))
        raise RpcError(ErrorCode.INVALID_REQUEST, f"{verb}: {problems}") from None


async def _translated(items: AsyncIterator[WireModel]) -> AsyncGenerator[Payload, None]:
    """`items` as JSON, with operator-facing errors turned into wire refusals; closes `items`."""
    try:
        async for item in items:
            yield item.model_dump(mode="json")
    except ChoirError as error:
        raise as_rpc_error(error) from None
    except Exception as error:
        raise unavailable_store(error) from None
    finally:
        close = getattr(items, "aclose", None)
        if close is not None:
            await close()
