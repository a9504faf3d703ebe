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
import importlib
import os
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AsyncExitStack
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final, cast

from pydantic import ValidationError

from choir.config import ConsoleGateway
from choir.daemon.agents.refusals import rpc_error_of
from choir.daemon.agents.services import AgentServices
from choir.daemon.gateway.commands import DmCommands
from choir.daemon.gateway.console import ConsoleDm, PushFn
from choir.daemon.gateway.held import GatewayNews
from choir.daemon.health.board import DaemonHealth
from choir.daemon.operator.agents.launches import Lifecycle, SelfRestart
from choir.daemon.operator.approvals.edges import OperatorApplyEdges
from choir.daemon.operator.context import IN_A_DM, OperatorContext
from choir.daemon.operator.feed import OperatorFeed
from choir.daemon.operator.recovery.start import note_restart, tell_admins
from choir.daemon.proposals.executor import Note, ProposalApplier
from choir.daemon.sessions.state import Clock, utc_now
from choir.errors import ChoirError
from choir.protocol import ErrorCode, WireModel, validation_problems
from choir.protocol.operator import requests as r
from choir.protocol.operator.contract import OPERATOR_MODELS
from choir.protocol.operator.items import HealthItem, HealthView
from choir.protocol.operator.verbs import OperatorVerb
from choir.store.approvals.pending import ApprovalRow
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


VerbFn = Callable[[OperatorContext, Any], Awaitable[Answer]]


class Route:
    """Who answers a verb: a function, or where one lives — `"agents.lifecycle:agent_start"`
    is `agent_start` of `choir.daemon.operator.agents.lifecycle`, imported at the verb's first
    call. choird starts without the verbs nobody has called, nor the update, proposal and
    memory code behind them (issue 13: start-up time and memory); the first call of one pays
    its import, a few ms. Its payload model comes from `OPERATOR_MODELS`."""

    def __init__(self, target: str | VerbFn) -> None:
        self._target = target

    @property
    def run(self) -> VerbFn:
        if isinstance(self._target, str):
            module, _, name = self._target.partition(":")
            found = getattr(importlib.import_module(f"{__package__}.{module}"), name)
            self._target = cast(VerbFn, found)
        return self._target


async def _session_events(ctx: OperatorContext, request: r.SessionEvents) -> Answer:
    from choir.daemon.operator import events

    if request.follow:
        return await events.follow_events(ctx, request)
    return await events.session_events(ctx, request)


async def _subscribe(ctx: OperatorContext, _: r.NoArguments) -> Answer:
    return ctx.feed.items(ctx.stage.running.version)


V = OperatorVerb
VERBS: Final[Mapping[OperatorVerb, Route]] = {
    V.STATUS: Route("status:status"),
    V.AGENT_LIST: Route("status:agent_list"),
    V.AGENT_STATUS: Route("status:agent_status"),
    V.AGENT_START: Route("agents.lifecycle:agent_start"),
    V.AGENT_STOP: Route("agents.lifecycle:agent_stop"),
    V.AGENT_VERIFY: Route("agents.verify:agent_verify"),
    V.AGENT_RESTART: Route("agents.lifecycle:agent_restart"),
    V.AGENT_BUILD: Route("agents.build:agent_build"),
    V.AGENT_UPDATE: Route("agents.update:agent_update"),
    V.AGENT_UPDATE_ALL: Route("agents.update:agent_update_all"),
    V.AGENT_ROLLBACK: Route("agents.rollback:agent_rollback"),
    V.SHUTDOWN: Route("agents.lifecycle:choird_shutdown"),
    V.CHOIRD_RESTART: Route("agents.lifecycle:choird_restart"),
    V.SESSION_LIST: Route("sessions:session_list"),
    V.SESSION_EVENTS: Route(_session_events),
    V.SESSION_ARTIFACT: Route("events:session_artifact"),
    V.SESSION_CORES: Route("sessions:session_cores"),
    V.SESSION_LOCKS: Route("sessions:session_locks"),
    V.SESSION_CANCEL: Route("sessions:session_cancel"),
    V.SESSION_COMPACT: Route("sessions:session_compact"),
    V.SESSION_RECOVER: Route("recovery.recover:session_recover"),
    V.APPROVAL_LIST: Route("approvals.verbs:approval_list"),
    V.APPROVAL_SHOW: Route("approvals.verbs:approval_show"),
    V.APPROVAL_APPROVE: Route("approvals.verbs:approval_approve"),
    V.APPROVAL_REJECT: Route("approvals.verbs:approval_reject"),
    V.APPROVAL_EXTEND: Route("approvals.verbs:approval_extend"),
    V.TOOL_REGISTER: Route("tools:tool_register"),
    V.WORKSPACE_LIST: Route("workspaces:workspace_list"),
    V.WORKSPACE_RESET: Route("workspaces:workspace_reset"),
    V.MODEL_LIST: Route("agents.models:model_list"),
    V.MODEL_GET: Route("agents.models:model_get"),
    V.MODEL_SET: Route("agents.models:model_set"),
    V.VOICE_LIST: Route("agents.models:voice_list"),
    V.VOICE_GET: Route("agents.models:voice_get"),
    V.VOICE_SET: Route("agents.models:voice_set"),
    V.LOGS: Route("logs:logs"),
    V.SECRET_LIST: Route("config:secret_list"),
    V.SECRET_APPLY: Route("config:secret_apply"),
    V.CONFIG_LOAD: Route("config:config_load"),
    V.CONFIG_DIFF: Route("config:config_diff"),
    V.CONFIG_APPLY: Route("config:config_apply"),
    V.CONFIG_SHOW: Route("config:config_show"),
    V.SUBSCRIBE: Route(_subscribe),
    V.CHAT_SEND: Route("chat:chat_send"),
    V.CHAT_REPLIES: Route("chat:chat_replies"),
    V.MEMORY_SEARCH: Route("memory.views:memory_search"),
    V.MEMORY_SHOW: Route("memory.views:memory_show"),
    V.MEMORY_STATS: Route("memory.views:memory_stats"),
    V.KNOWLEDGE_LIST: Route("memory.views:knowledge_list"),
    V.KNOWLEDGE_SHOW: Route("memory.views:knowledge_show"),
    V.KNOWLEDGE_PUT: Route("memory.views:knowledge_put"),
    V.KNOWLEDGE_DELETE: Route("memory.views:knowledge_delete"),
    V.KNOWLEDGE_ADD: Route("memory.knowledge:knowledge_add"),
    V.KNOWLEDGE_WRITE: Route("memory.knowledge:knowledge_write"),
    V.KNOWLEDGE_RENAME: Route("memory.knowledge:knowledge_rename"),
    V.KNOWLEDGE_ALIAS: Route("memory.knowledge:knowledge_alias"),
    V.KNOWLEDGE_HISTORY: Route("memory.knowledge:knowledge_history"),
    V.KNOWLEDGE_RESTORE: Route("memory.knowledge:knowledge_restore"),
    V.KNOWLEDGE_LINK: Route("memory.graph:knowledge_link"),
    V.KNOWLEDGE_UNLINK: Route("memory.graph:knowledge_unlink"),
    V.KNOWLEDGE_SOURCE: Route("memory.source:knowledge_source"),
    V.KNOWLEDGE_EXPAND: Route("memory.expand:knowledge_expand"),
    V.MEMORY_ABOUT: Route("memory.curation:memory_about"),
    V.MEMORY_FORGET: Route("memory.curation:memory_forget"),
    V.MEMORY_REEMBED: Route("memory.reembed:memory_reembed"),
    V.MEMORY_BACKFILL_TOOLS: Route("memory.tool_backfill:memory_backfill_tools"),
    V.SESSION_MESSAGES: Route("memory.session_messages:session_messages"),
    V.GATEWAY_STATUS: Route("gateways:gateway_status"),
    V.SESSION_INJECT: Route("sessions:session_inject"),
    V.USAGE: Route("usage:usage"),
    V.INBOX_LIST: Route("recovery.inbox:inbox_list"),
    V.INBOX_RESOLVE: Route("recovery.inbox:inbox_resolve"),
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
            config=lambda row, note: _apply_config_change(self.context, row, note),
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


async def _apply_config_change(ctx: OperatorContext, row: ApprovalRow, note: Note) -> str:
    """An approved config change applied (`approvals.config_change`, imported by the first)."""
    from choir.daemon.operator.approvals.config_change import apply_config_change

    return await apply_config_change(ctx, row, note)


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
