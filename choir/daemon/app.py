"""choird's composition root: startup (§6.2, each step logged), serving, shutdown.

    async with ChoirDaemon(options) as daemon:   # steps 1-10; "choird ready" when done
        await daemon.wait_stopped()              # until SIGTERM/SIGINT, stop(), begin_restart()

`begin_restart` (`choird.restart`) stops it the same way but leaves its agents and the embedded
Postgres running: the caller then re-executes choird (`reexec`), whose new image adopts them.

Every long-lived piece (database, listeners, timers) is entered on an `AsyncExitStack`, so a
failure half-way through start-up unwinds what was already started.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import ssl
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final, Literal, Protocol, Self, runtime_checkable

from choir import __version__
from choir.config import ChoirConfig, EmbeddedPostgres, SecretStore, load_home
from choir.config.resources import LOCAL_EMBEDDING_DIMENSIONS
from choir.daemon.health.board import DaemonHealth, HealthView
from choir.daemon.health.disk import CHECK_EVERY_S as DISK_CHECK_EVERY_S
from choir.daemon.health.disk import DiskWatch
from choir.daemon.health.store import StoreWatch
from choir.daemon.instance_lock import InstanceLock
from choir.daemon.staging.stage import ConfigStage, arm_log_redaction
from choir.errors import UnavailableError, UsageError
from choir.failpoints import failpoint
from choir.home import ChoirHome
from choir.logs import get_logger
from choir.logs.handler import set_write_error_hook
from choir.logs.live import CHECK_EVERY_S as LIVE_LOG_CHECK_EVERY_S
from choir.store.postgres.database import Database, open_database
from choir.store.postgres.failures import disk_failure
from choir.store.postgres.target import EmbeddedTarget, ExternalTarget, PostgresTarget
from choir.transport import Handler, PushHub, UdsServer
from choir.transport.limits import AGENT_SOCKET_LIMITS
from choir.transport.uds.sockfile import claim

if TYPE_CHECKING:  # aiohttp and cryptography load only for --transport http
    from choir.core.memory.access import Viewer
    from choir.daemon.agents.host_tools import HostToolCall
    from choir.daemon.agents.services import AgentServices
    from choir.daemon.gateway.held import GatewayNews
    from choir.daemon.health.postgres import PostgresSupervisor
    from choir.daemon.memory.closing.archives import ArchiveWriter
    from choir.daemon.memory.closing.close import SessionCloser
    from choir.daemon.memory.closing.tool_rows import ToolRowBackfill
    from choir.daemon.memory.embedding.index import MemoryIndex
    from choir.daemon.memory.embedding.service import MemoryService
    from choir.daemon.memory.embedding.usage import EmbeddingMeter
    from choir.daemon.memory.embedding.vector_models import VectorModels
    from choir.daemon.memory.reembed import Reembedder
    from choir.daemon.memory.search.prewarm import Bm25Prewarm
    from choir.daemon.memory.store import MemoryStore, PostgresMemoryStore
    from choir.daemon.memory.tools.browse import BrowsePage
    from choir.daemon.memory.tools.host import Indexer
    from choir.daemon.prestart import EarlyStart
    from choir.daemon.reexec import ReExec
    from choir.daemon.runtimes.agent_link import HttpLink
    from choir.daemon.runtimes.base import AgentRuntime, RuntimeChoice
    from choir.daemon.runtimes.bridge_link import BridgeLink
    from choir.daemon.runtimes.bwrap import SandboxFound
    from choir.daemon.sessions.state import SessionEnded
    from choir.daemon.telemetry.metrics import ChoirMetrics
    from choir.daemon.workers.browser.chromium import BrowserWorker
    from choir.transport import HttpServer

log = get_logger("choird")

AFTER_DATABASE: Final = (
    "choir.daemon.agents.handler",
    "choir.daemon.agents.pushes",
    "choir.daemon.agents.services",
    "choir.daemon.health.postgres",
    "choir.daemon.images.repo_refresh",
    "choir.daemon.memory.embedding.service",
    "choir.daemon.operator.api",
    "choir.daemon.runtimes.adopt",
    "choir.daemon.runtimes.select",
    "choir.daemon.sessions.state",
    "choir.daemon.workers.browser.off",
    "choir.store.agent_schema",
)
"""What start-up needs only once Postgres is up, about half of choird's imports: imported while
the embedded server starts (`_start`), which it does in a process of its own, on another core.
Not the operator verbs (`operator.api.Route` imports each at its first call) nor the browser
worker unless `browser.enabled` (`_start_browser`): what nobody uses is not imported at all."""

POOL_MIN_SIZE: Final = 1
"""Connections the pool keeps open while idle. Each is a Postgres backend of ~14-19 MB
resident; one serves a quiet choird, and the pool opens more (up to its max) while queries
overlap."""
POOL_IDLE_CLOSE_S: Final = 10.0
"""How long a connection the pool opened for overlapping queries stays idle before it closes:
a burst (start-up's background work next to an operator's `status`) must not leave choird
holding a second backend for asyncpg's default five minutes."""

MEMORY_START_DELAY_S: Final = 1.0
"""How long after "choird ready" session memory starts (its store imports numpy): agents
started at once get their first reply before it."""

MEMORY_READY_WAIT_S: Final = 30.0
"""How long a memory tool call made while memory is still starting waits for it."""

DEFAULT_EMBEDDING_DIMS: Final = LOCAL_EMBEDDING_DIMENSIONS
"""The vectors' size when no embedding model is configured: the local model's (DESIGN-NOTES);
a configured one's comes from `config.embedding.vector_dimensions`."""

OperatorFactory = Callable[["ChoirDaemon"], Handler]


@runtime_checkable
class GatewayHost(Protocol):
    """An operator API that also runs the Telegram bots (`OperatorApi`): their DMs' commands
    are its verbs."""

    async def start_gateways(self, stack: AsyncExitStack) -> list[str]: ...


@dataclass(frozen=True)
class DaemonOptions:
    home: ChoirHome
    transport: Literal["uds", "http"] = "uds"
    """How agents reach choird: their own Unix sockets, or HTTP(S) on `listen`."""
    listen: str = "127.0.0.1:9400"
    """host:port of the HTTP listener (transport http)."""
    tls_cert: Path | None = None
    tls_key: Path | None = None
    tls_self_signed: bool = False
    """Create (once) and serve a self-signed certificate from `$CHOIR_HOME/tls/`."""
    runtime: RuntimeChoice | None = None
    """Where agents run; None means config.json's `container.runtime` (default `auto`)."""
    agents_over: Literal["uds", "http"] | None = None
    """How the agents choird starts reach it; None: as `transport` says. (Tests serve both
    transports and keep started agents on their sockets unless they ask.)"""


class ChoirDaemon:
    """The running daemon: database, services, listeners and timers."""

    def __init__(
        self,
        options: DaemonOptions,
        operator: OperatorFactory | None = None,
        early: EarlyStart | None = None,
        reexec: ReExec | None = None,
    ) -> None:
        self.options = options
        self.reexec = reexec
        """How choird re-executes itself (`choird.restart`); None: it runs inside another
        program and cannot."""
        self.restarting = False
        """Set by `begin_restart`: the stop leaves agents and Postgres running."""
        self.home = options.home
        # numbered above any seq a previous choird handed out (`PushHub`'s docstring)
        self.hub = PushHub(base=time.time_ns() // 1_000_000)
        self.started_at = time.monotonic()
        self._operator = operator
        self._early = early
        """The home's lock, taken, and its embedded server, starting: `choird` begins both
        before it imports this module (`choir.daemon.prestart`)."""
        self._stack = AsyncExitStack()
        self._stopped = asyncio.Event()
        self._agent_sockets: dict[str, UdsServer] = {}
        self._closing: set[asyncio.Task[None]] = set()
        self.database: Database | None = None
        self.services: AgentServices | None = None
        self.http: HttpServer | None = None
        self._certificate: Path | None = None
        """The certificate the HTTPS listener serves: what the agents choird starts trust."""
        self._bridge: BridgeLink | None = None
        """The listener docker agents reach on their network's gateway (`bridge_link`)."""
        self.operator: Handler | None = None
        """The operator API (None when started without one, as some tests do)."""
        self.runtime: AgentRuntime | None = None
        """Runs the agents `agent.start` starts: docker or process (`runtime_select`)."""
        self.health = DaemonHealth()
        """Postgres and disk problems, as `status` and the console's header show them."""
        self.disk = DiskWatch(
            self.health, self._disk_paths, probed=[self.home.root, self.home.logs]
        )
        self.postgres: PostgresSupervisor | None = None
        """Restarts the embedded server when it dies (None for an external Postgres)."""
        self.embedding_meter: EmbeddingMeter | None = None
        """choird's embedding calls as usage rows (issue 19)."""
        self.memory: MemoryService | None = None
        """Embeds memory chunks and queries (§11.9); its provider loads at first use."""
        self.memory_store: MemoryStore | None = None
        self.memory_index: MemoryIndex | None = None
        """Agents' memory and its vectors: set `MEMORY_START_DELAY_S` after ready, in the
        background (`memory_ready` is set then)."""
        self.vector_models: VectorModels | None = None
        """Which agents' stored vectors are of another embedding model (step 4)."""
        self.memory_reembed: Reembedder | None = None
        """`memory reembed` (set with the memory index)."""
        self.memory_closer: SessionCloser | None = None
        """Puts ended sessions into memory (§11.8 steps 6-7)."""
        self.memory_ready = asyncio.Event()
        self.archive_writer: ArchiveWriter | None = None
        """Stores each compaction's archive once its event is durable (from the start)."""
        self.gateway_news: GatewayNews | None = None
        """The adopted agents' first events, kept from before step 6 until the gateways
        started (`gateway.held`)."""
        self.browser: BrowserWorker | None = None
        """The browser worker of `choir.web.browse` (§18.2); Chromium runs when enabled."""
        self._memory_wanted = asyncio.Event()
        """Set by the first memory work (a session ending, a memory tool call, `reembed`): what
        a choird with nothing to close or embed at its start waits for to load memory."""
        self._memory_start: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()
        """Set at "choird ready" (start-up done)."""

    async def __aenter__(self) -> Self:
        try:
            await self._start()
        except BaseException:
            await self._stack.aclose()
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        log.info("choird restarting: agents keep running" if self.restarting else "choird stopping")
        try:
            await failpoint("choird.before_stop_agents")
            if self.restarting:
                self._keep_postgres()
            elif self.runtime is not None:
                await self.runtime.stop_all()  # gracefully, while sockets and database serve
            if self.services is not None:
                await self.services.inbox.close()  # settle what the stops left, database up
            for server in list(self._agent_sockets.values()):
                await server.close()
        finally:
            # whatever failed above, the home is let go: its socket, database and instance lock
            await self._stack.aclose()
        log.info("choird stopped: re-executing itself" if self.restarting else "choird stopped")

    def stop(self) -> None:
        """Stop (SIGTERM, SIGINT, `shutdown`): also one asked during a restart, which then ends
        this process as a kill would, its agents left running — a supervisor stopping choird
        waits for this pid to exit, not to run choird again."""
        self.restarting = False
        self._stopped.set()

    def restart_refusal(self) -> str | None:
        """Why this choird cannot restart in place (one line), or None (`choird.restart`)."""
        if self.reexec is None:
            return "it runs inside another program, not as the choird command"
        if self.http is not None and _host_port(self.options.listen)[1] == 0:
            return (
                f"its agents reach it on {self.http.url}, a port the system picked at its start "
                "(--listen …:0) that a new start would not get back"
            )
        return self.reexec.refusal()

    def begin_restart(self) -> None:
        """Stop as `stop` does, but leave the agents and the embedded Postgres running for the
        re-executed choird to adopt (`choird.restart`)."""
        self.restarting = True
        self._stopped.set()

    def _keep_postgres(self) -> None:
        """The embedded server outlives this image (the new one adopts it), also when its start
        was begun early and the database never took it over."""
        for server in (
            self.database.embedded if self.database is not None else None,
            self._early.postgres if self._early is not None else None,
        ):
            if server is not None:
                server.keep_running()

    async def wait_stopped(self) -> None:
        await self._stopped.wait()

    # -- start-up --------------------------------------------------------------------------

    async def _start(self) -> None:
        # Before touching Postgres: a second choird on this home would otherwise adopt the live
        # one's embedded server, crash its sessions as orphans (step 7) and stop the server as
        # it unwinds. The lock closes the race of two choirds starting at the same instant.
        early = self._early
        if early is None:
            instance = InstanceLock(self.home.root)
            instance.acquire()
            self._stack.callback(instance.release)
        else:
            self._stack.callback(early.lock.release)
            if early.postgres is not None:  # the database stops it; this, if it is never used
                self._stack.push_async_callback(asyncio.to_thread, early.postgres.stop)
        claim(self.home.operator_socket, "choird")
        loaded = load_home(self.home)
        arm_log_redaction(loaded.secrets)
        config = loaded.config
        log.info(
            "step 1-2: config and secrets valid",
            fields={"config_hash": loaded.config_hash[:12], "warnings": len(loaded.warnings)},
        )
        for warning in loaded.warnings:
            log.warning(warning)
        self._stack.callback(self._watch_log_writes())
        target = _target(self.home, config, loaded.secrets)
        observe = StoreWatch(self.health, self.disk, _where(target))
        server = early.postgres if early is not None else None
        if not isinstance(target, EmbeddedTarget) or (
            server and server.datadir != target.datadir.expanduser().resolve()
        ):
            server = None
        # bwrap's probe is a process making namespaces (5-20 ms of waiting): for the process
        # runtime it runs on a thread beside the imports, not on the loop after them
        runtime = self.options.runtime or config.container.runtime
        sandbox = (
            asyncio.ensure_future(asyncio.to_thread(_find_sandbox))
            if runtime == "process"
            else None
        )
        opening = asyncio.ensure_future(
            self._stack.enter_async_context(
                open_database(
                    target,
                    min_size=POOL_MIN_SIZE,
                    observe=observe,
                    server=server,
                    idle_close_s=POOL_IDLE_CLOSE_S,
                )
            )
        )
        try:
            # On a thread: the loop meanwhile waits for the server and opens the pool (a dozen
            # round trips to Postgres, a few ms of CPU between long waits).
            await asyncio.to_thread(_import_all, AFTER_DATABASE)
        finally:
            self.database = await opening
        from choir.daemon.agents.services import AgentServices
        from choir.daemon.gateway.held import GatewayNews
        from choir.daemon.health.postgres import PostgresSupervisor
        from choir.daemon.memory.embedding.service import MemoryService, stage_source
        from choir.daemon.runtimes.adopt import adopt_agents
        from choir.daemon.runtimes.select import select_runtime
        from choir.daemon.sessions.state import utc_now

        log.info("step 3+5: postgres ready", fields={"where": self.database.params.where})
        await self._agent_schemas(config)
        from choir.daemon.staging.persisted import restore_config_version

        # the version an operator last saw survives the restart (issue 19)
        version = await restore_config_version(self.database.pool, loaded)
        stage = ConfigStage(loaded, version=version)
        services = AgentServices.build(self.database.pool, stage)
        self.services = services
        self._stack.push_async_callback(self._close_memory_index)  # after the service drains
        self.embedding_meter = self._embedding_meter(stage)
        self.memory = await self._stack.enter_async_context(
            MemoryService(stage_source(stage), meter=self.embedding_meter)
        )
        self._stack.push_async_callback(self._stop_memory)  # before the service drains
        # Nobody could heartbeat while no choird ran: the threshold counts from now.
        services.sessions.excuse(utc_now())
        self._stack.callback(self.health.subscribe(self._on_health))
        if self.database.embedded is not None:
            self.postgres = PostgresSupervisor(
                self.database.embedded, self.database.pool, self.health
            )
        self.runtime = await select_runtime(
            runtime,
            self.home,
            services.sessions,
            self.hub.push,
            lambda: stage.running.config,
            self.agent_link,
            self.docker_link,
            sandbox=await sandbox if sandbox is not None else None,
        )
        self._stack.callback(self.runtime.close)
        self.home.create_directories()  # adopted agents get their sockets back right away
        self._hear_agents(services)
        metrics = self._feed_metrics(services) if config.metrics.listen is not None else None
        # what they replicate at once is kept for the gateways, which start at step 8
        self.gateway_news = news = GatewayNews.hold(services)
        self._stack.callback(news.close)
        adoption = await adopt_agents(
            self.runtime,
            services.sessions,
            self.open_agent_socket,  # adopted agents are retrying: their sockets come back now
            threshold_ms=config.crash_detection_threshold_ms,
        )
        log.info(
            "step 6: agents left by a previous run adopted or removed",
            fields={
                "runtime": self.runtime.name,
                "adopted": [agent.agent_id for agent in adoption.adopted],
                "removed": adoption.removed,
            },
        )
        log.info("step 7: stale leases released", fields={"sessions": len(adoption.crashed)})
        for agent in adoption.adopted:  # accepted before the restart, maybe never pushed
            await services.inbox.redeliver(agent.session_id)
        await failpoint("choird.start.after_adoption")
        await self._listen(services)
        await self._start_gateways()
        news.seal()
        await failpoint("choird.start.after_gateways")
        if metrics is not None and config.metrics.listen is not None:
            await self._serve_metrics(metrics, config.metrics.listen, stage)
        self._stack.push_async_callback(self._cancel_timers, self._start_timers(services))
        self._serve_memory_tools(services, stage)
        await self._start_browser(services, config)
        self._memory_start = asyncio.create_task(self._start_memory(stage), name="memory-start")
        self._ready.set()
        log.info(
            "choird ready",
            fields={
                "version": __version__,
                "config_version": stage.running.version,
                "agents": len(config.agents),
                "models": len(config.models),
                "workspaces": len(config.workspaces),
                "transport": self.options.transport,
                "socket": str(self.home.operator_socket),
            },
        )

    def _hear_agents(self, services: AgentServices) -> None:
        """What choird does on the agents' news, listening from before step 6 (adoption): an
        adopted agent reconnects at once and may replicate a compaction or end its session, and
        from step 9 an operator may decide its approvals, all before "choird ready" — each is
        heard once, as it happens, never missed nor replayed. The pushes (approval outcomes,
        user messages, a session's end) wait in the hub's history for an agent that has not
        subscribed yet (`PushHub`); an ended session's socket, open since its adoption, is
        closed; an archive waits for memory, which starts after "choird ready"
        (`_archive_parts`)."""
        from choir.daemon.agents.pushes import wire_pushes

        self._stack.callback(wire_pushes(services, self.hub))
        self._stack.callback(services.sessions.subscribe(self._on_session_ended))
        self._stack.callback(services.sessions.subscribe(lambda _: self._memory_wanted.set()))
        self._stack.callback(self._store_archives(services))

    async def _start_browser(self, services: AgentServices, config: ChoirConfig) -> None:
        """The browser worker and `choir.web.browse` (§18.2). Chromium starts in the background
        when `browser.enabled` (choird is ready first); off, the tool answers why and agents
        withhold it, and no worker runs (`browser.off`). Contexts follow sessions: made at
        start, closed at end."""
        if not config.browser.enabled:
            from choir.daemon.workers.browser.off import register_off

            self._stack.callback(register_off(services.host_tools))
            return
        from choir.daemon.workers.browser.chromium import BrowserWorker
        from choir.daemon.workers.browser.tool import BrowseTool

        worker = await self._stack.enter_async_context(BrowserWorker(config.browser))
        self.browser = worker
        self._stack.callback(services.sessions.subscribe_started(worker.session_started))
        self._stack.callback(
            services.sessions.subscribe(lambda ended: worker.session_ended(ended.session_id))
        )
        for row in await services.sessions.active():  # adopted agents get theirs too
            worker.session_started(row.session_id, row.agent_id)
        stage = services.stage

        def workspace_of(call: HostToolCall) -> Path:
            workspaces = stage.running.config.workspaces
            return Path(workspaces[call.context.bindings.workspace].path)

        self._stack.callback(BrowseTool(worker, workspace_of).register(services.host_tools))

    def _embedding_meter(self, stage: ConfigStage) -> EmbeddingMeter:
        """Records embedding calls at the running config's `embedding` price; the rows still
        waiting are written as choird stops (after the service has drained its queue)."""
        from choir.daemon.memory.embedding.usage import EmbeddingMeter

        database = self.database
        meter = EmbeddingMeter(
            lambda: database.pool if database is not None else None,
            lambda: stage.running.config.embedding.cost_price,
        )
        self._stack.push_async_callback(meter.aclose)
        return meter

    def _feed_metrics(self, services: AgentServices) -> ChoirMetrics:
        """The opt-in Prometheus metrics (§22.1), hearing the agents from before step 6 as
        `_hear_agents` does: what an adopted agent replicates or ends in the start-up window
        is counted. Their modules load only when metrics are on."""
        from choir.daemon.telemetry.wiring import feed_metrics

        return feed_metrics(self._stack, services, self.embedding_meter)

    async def _serve_metrics(self, metrics: ChoirMetrics, listen: str, stage: ConfigStage) -> None:
        """The metrics endpoint, listening once the gateways started (as before)."""
        from choir.daemon.telemetry.wiring import serve_metrics_of

        assert self.database is not None
        await serve_metrics_of(
            self._stack,
            metrics,
            listen=listen,
            home=self.home.root,
            pool=self.database.pool,
            agents=lambda: sorted(stage.running.config.agents),
        )

    async def _start_memory(
        self, stage: ConfigStage, delay_s: float = MEMORY_START_DELAY_S
    ) -> None:
        """Session memory, after start-up: close the sessions that ended while no choird ran
        (or before it closed them), then backfill vectors missing, all in the background."""
        await asyncio.sleep(delay_s)
        if not await self._memory_work_waiting(stage):
            log.info("memory: nothing to close or embed; it loads with the first memory work")
            await self._memory_wanted.wait()
        modules = ("choir.daemon.memory.store", "choir.daemon.memory.closing.close")
        await asyncio.to_thread(lambda: [importlib.import_module(m) for m in modules])
        from choir.daemon.memory.closing.close import SessionCloser
        from choir.daemon.memory.embedding.index import MemoryIndex
        from choir.daemon.memory.reembed import Reembedder
        from choir.daemon.memory.store import PostgresMemoryStore

        assert self.database is not None
        assert self.memory is not None
        assert self.services is not None
        assert self.vector_models is not None
        models = self.vector_models
        self.memory_store = PostgresMemoryStore(
            self.database.pool,
            models=models,
            weights=lambda: stage.running.config.relevance.weights(),
        )
        self.memory_index = MemoryIndex(
            self.memory_store,
            self.memory,
            agents=lambda: stage.running.config.agents,
            current=models.current,
        )
        self.memory_reembed = Reembedder(
            self.database.pool, self.memory_store, self.memory, self.memory_index, models
        )
        self.memory_closer = SessionCloser(
            self.database.pool, self.memory_store, self.memory_index, lambda: stage.running.config
        )
        self.services.sessions.subscribe(self.memory_closer.session_ended)
        prewarm = self._prewarm_bm25(self.memory_store, self.services)
        running = await self.services.sessions.active()
        # The start's work one piece after the other, not side by side: the archives that
        # waited for memory, the running agents' BM25 builds, the closes of the sessions that
        # ended meanwhile, then the vectors' backfill. Each holds a pooled connection while it
        # runs, and a connection opened for it is a Postgres backend of ~15-20 MB that stays
        # until it has idled `POOL_IDLE_CLOSE_S`. The backfill is scheduled before memory is
        # ready, so `memory_index.backfilled()` waits for all of it.
        closed = asyncio.Event()
        self.memory_index.backfill_all(after=closed.wait)
        self.memory_ready.set()
        if self.archive_writer is not None:
            await self.archive_writer.settled()
        for row in running:
            prewarm.session_started(row.session_id, row.agent_id)
        await prewarm.settled()
        self.memory_closer.start()
        await self.memory_closer.idle()
        closed.set()

    def _prewarm_bm25(self, store: PostgresMemoryStore, services: AgentServices) -> Bm25Prewarm:
        """Each starting agent's BM25 index built in the background (`memory.prewarm`); the
        caller starts the running ones'."""
        from choir.daemon.memory.search.prewarm import Bm25Prewarm

        prewarm = Bm25Prewarm(store)
        self._stack.push_async_callback(prewarm.aclose)
        self._stack.callback(services.sessions.subscribe_started(prewarm.session_started))
        return prewarm

    def _serve_memory_tools(self, services: AgentServices, stage: ConfigStage) -> None:
        """`choir.memory.query` (session, knowledge) and `choir.memory.upsert` from now on;
        a call made before memory has started waits for it (`MEMORY_READY_WAIT_S`)."""
        from choir.daemon.memory.tools.host import MemoryTools

        assert self.memory is not None
        assert self.vector_models is not None
        tools = MemoryTools(
            self._memory_parts,
            self.memory.embed_query,
            lambda: stage.running.config.agents,
            current=self.vector_models.current,
            health=self._memory_health,
            browse=self._browse_session,
            keys=services.memory_keys,
            knowledge_exists=self._knowledge_exists,
        )
        self._stack.callback(tools.register(services.host_tools))

    async def _knowledge_exists(self, agent_id: str) -> bool:
        """Whether the agent has knowledge to recall, asked without loading memory."""
        from choir.store.memory.work import knowledge_exists

        assert self.database is not None
        async with self.database.pool.acquire() as conn:
            return await knowledge_exists(conn, agent_id)

    async def _memory_health(self, agent_id: str) -> dict[str, Any]:
        """`choir.memory.query` mode `stats`: the agent's memory health and the embedding
        queue, as the model reads them."""
        from choir.core.memory.chunks import Tier
        from choir.daemon.memory.health import memory_health

        store, _ = await self._memory_parts()
        assert self.database is not None
        assert self.memory is not None
        health = await memory_health(self.database.pool, store, agent_id)
        stats = health.stats
        return {
            "chunks": {str(tier): stats.chunks[tier] for tier in Tier},
            "sessions": {str(tier): stats.sessions[tier] for tier in Tier},
            "knowledge_items": stats.knowledge_items,
            "vectors_missing": stats.vectors_missing,
            "vector_coverage": health.vector_coverage,
            "embedding_queue_depth": self.memory.depth,
            "sessions_pending": health.sessions_pending,
            "sessions_unsummarized": health.sessions_unsummarized,
            "tool_rows": health.tool_rows,
            "tool_sessions_undescribed": health.tool_sessions_undescribed,
            "tool_calls_undescribed": health.tool_calls_undescribed,
            "tree_depth": stats.tree_depth,
        }

    async def _browse_session(
        self, agent_id: str, session_id: str, after_rev: int, limit: int, viewer: Viewer
    ) -> BrowsePage:
        """`choir.memory.query` mode `browse`: a page of the session's messages, if `viewer`
        sees that session's user's."""
        from choir.daemon.memory.tools.browse import browse_page

        assert self.database is not None
        return await browse_page(
            self.database.pool,
            agent_id,
            session_id,
            after_rev=after_rev,
            limit=limit,
            viewer=viewer,
        )

    async def memory_started(self) -> None:
        """Wait until session memory runs, loading it now if it was waiting for work."""
        self._memory_wanted.set()
        await self.memory_ready.wait()

    async def _memory_work_waiting(self, stage: ConfigStage) -> bool:
        """Whether an ended session awaits its close or a row its vector (no numpy needed)."""
        from choir.store.memory.work import memory_work_waiting

        assert self.database is not None
        try:
            async with self.database.pool.acquire() as conn:
                return await memory_work_waiting(conn, list(stage.running.config.agents))
        except Exception as exc:  # the database is away: memory starts and retries on its own
            log.warning(
                "memory: could not ask whether it has work; starting it",
                fields={"error": f"{type(exc).__name__}: {exc}"},
            )
            return True

    async def _memory_parts(self) -> tuple[MemoryStore, Indexer]:
        try:
            await asyncio.wait_for(self.memory_started(), MEMORY_READY_WAIT_S)
        except TimeoutError:
            raise UnavailableError(
                f"memory has not started within {MEMORY_READY_WAIT_S:.0f} s of the call; "
                "retry shortly, and see choird's log if it persists"
            ) from None
        assert self.memory_store is not None
        assert self.memory_index is not None
        return self.memory_store, self.memory_index.index

    async def _archive_parts(self) -> tuple[MemoryStore, Indexer]:
        """`_memory_parts` for the archive writer, which listens from before adoption: an
        archive replicated while choird starts waits for "choird ready" before memory's
        `MEMORY_READY_WAIT_S` counts (memory starts only after it)."""
        await self._ready.wait()
        return await self._memory_parts()

    def _store_archives(self, services: AgentServices) -> Callable[[], None]:
        """Store each compaction's archive once its event is durable; returns the unsubscribe."""
        from choir.daemon.memory.closing.archives import ArchiveWriter

        writer = self.archive_writer = ArchiveWriter(self._archive_parts)
        return services.replicator.subscribe(
            lambda durable: writer.durable(durable.agent_id, durable.session_id, durable.events)
        )

    async def _stop_memory(self) -> None:
        """Closes in progress get a bounded grace, then stop (resumed at the next start)."""
        if self.archive_writer is not None:
            await self.archive_writer.aclose()
        if self._memory_start is not None and not self._memory_start.done():
            self._memory_start.cancel()
            await asyncio.gather(self._memory_start, return_exceptions=True)
        if self.memory_closer is not None:
            await self.memory_closer.aclose()
        if self.memory_index is not None:
            await self.memory_index.stop()

    async def _close_memory_index(self) -> None:
        """Store the vectors the embedding service's drain delivered (bounded)."""
        if self.memory_index is not None:
            await self.memory_index.aclose()

    async def _agent_schemas(self, config: ChoirConfig) -> None:
        from choir.daemon.memory.embedding.vector_models import VectorModels
        from choir.store.agent_schema import ensure_agent_schema
        from choir.store.memory.embedding_model import EmbeddingModel

        assert self.database is not None
        configured = EmbeddingModel(config.embedding.model_name, config.embedding.vector_dimensions)
        models = VectorModels(configured)
        async with self.database.pool.acquire() as conn:
            for agent_id in config.agents:
                stored = await ensure_agent_schema(conn, agent_id, configured.dims, configured.name)
                models.record(agent_id, stored)
        self.vector_models = models
        log.info("step 4: agent schemas and roles ready", fields={"agents": len(config.agents)})
        for agent_id, stored in models.stale().items():
            log.warning(
                f"agent {agent_id}'s memory vectors are of {stored}, not the configured "
                f"{configured}: its memory is searched by text until "
                f"`choirctl memory reembed {agent_id}` re-embeds it",
                fields={"agent_id": agent_id},
            )

    async def reembedder(self, timeout_s: float = 30.0) -> Reembedder | None:
        """The re-embedder, once session memory started (`MEMORY_START_DELAY_S` after ready);
        None if it does not within `timeout_s`."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):
                await self.memory_started()
        return self.memory_reembed

    async def tool_backfill(self, timeout_s: float = 30.0) -> ToolRowBackfill | None:
        """`memory backfill-tools`' runner, once session memory started; None if it does not
        within `timeout_s`."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):
                await self.memory_started()
        if self.memory_closer is None or self.memory_store is None or self.database is None:
            return None
        from choir.daemon.memory.closing.tool_rows import ToolRowBackfill

        assert self.memory_index is not None
        return ToolRowBackfill(
            self.database.pool, self.memory_store, self.memory_index, self.memory_closer.lock
        )

    async def _listen(self, services: AgentServices) -> None:
        from choir.daemon.agents.handler import AgentHandler

        self.home.create_directories()  # only narrows existing private directories' modes
        if self._operator is not None:
            self.operator = self._operator(self)
            operator = UdsServer(self.home.operator_socket, self.operator, hub=self.hub)
            await self._stack.enter_async_context(operator)
        if self.options.transport == "http":
            from choir.daemon.runtimes.agent_link import is_wildcard
            from choir.transport import HttpServer

            host, port = _host_port(self.options.listen)
            self.http = HttpServer(
                AgentHandler(services.rpc, services.sessions, link=self._http_url),
                hub=self.hub,
                host=host,
                port=port,
                ssl_context=self._tls(host),
                # on a wildcard address the bridge listener shares the port (`bridge_link`)
                reuse_port=is_wildcard(host),
            )
            await self._stack.enter_async_context(self.http)
            await self._listen_on_bridge(services)
        log.info(
            "step 9: accepting commands",
            fields={
                "operator_socket": str(self.home.operator_socket),
                "agent_http": self.http.url if self.http else None,
            },
        )

    async def _listen_on_bridge(self, services: AgentServices) -> None:
        """Docker agents' HTTPS listener on their network's gateway (`bridge_link`)."""
        from choir.daemon.agents.handler import AgentHandler
        from choir.daemon.runtimes.bridge_link import open_bridge
        from choir.daemon.runtimes.docker import DockerRuntime
        from choir.transport import HttpServer

        over = self.options.agents_over or self.options.transport
        if over != "http" or self.http is None or not isinstance(self.runtime, DockerRuntime):
            return

        def serve(host: str, port: int, tls: ssl.SSLContext) -> HttpServer:
            url = f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"
            handler = AgentHandler(services.rpc, services.sessions, link=lambda: url)
            return HttpServer(
                handler, hub=self.hub, host=host, port=port, ssl_context=tls, reuse_port=True
            )

        self._bridge = await open_bridge(
            self.runtime, self.http, self.home.root / "tls", self._stack, serve
        )

    async def _start_gateways(self) -> None:
        """Step 8 (§6.2): the Telegram bots, which run the operator's commands for their DMs
        — hence once the operator API exists. Each connects and polls in the background: a
        bot Telegram does not answer, or whose token it rejects, is logged, never waited for."""
        bots: list[str] = []
        if isinstance(self.operator, GatewayHost):
            bots = await self.operator.start_gateways(self._stack)
        log.info("step 8: gateways", fields={"console": "ready", "telegram": bots})

    def _tls(self, host: str) -> ssl.SSLContext | None:
        from choir.transport.tls import DEFAULT_NAMES, ensure_self_signed, server_context

        cert, key = self.options.tls_cert, self.options.tls_key
        if self.options.tls_self_signed:
            cert, key = self.home.root / "tls" / "choird.crt", self.home.root / "tls" / "choird.key"
            # a listener on a specific address is what started agents connect to: named too
            names = (
                DEFAULT_NAMES
                if host in (*DEFAULT_NAMES, "0.0.0.0", "::")
                else (*DEFAULT_NAMES, host)
            )
            if ensure_self_signed(cert, key, names=names):
                log.info("created a self-signed certificate", fields={"cert": str(cert)})
        if cert and key:
            self._certificate = cert
            return server_context(cert, key)
        if host not in ("127.0.0.1", "::1", "localhost"):
            raise UsageError(
                f"plain HTTP on {host} would cross a network boundary: "
                "pass --tls-cert/--tls-key or --tls-self-signed (§12.1)"
            )
        return None

    # -- agents ----------------------------------------------------------------------------

    def _http_url(self) -> str:
        return self.http.url if self.http is not None else "http"

    def agent_link(self) -> HttpLink | None:
        """choird's HTTP(S) listener as the agents it starts reach it (`--transport http`,
        §12.1); None: they use their own sockets."""
        from choir.daemon.runtimes.agent_link import HttpLink, local_url

        over = self.options.agents_over or self.options.transport
        if over != "http" or self.http is None:
            return None
        return HttpLink(local_url(self.http.url), self._certificate)

    def docker_link(self, network: str) -> HttpLink | None:
        """choird's HTTPS listener on `network`'s gateway as containers on it reach it
        (`--transport http`, `bridge_link`); None: they use their own sockets."""
        return self._bridge.on(network) if self._bridge is not None else None

    async def open_agent_socket(self, agent_id: str) -> Path:
        """The agent's own socket, created for its session (or again for an adopted agent), in
        a directory of its own that a container mounts at /run/choir. The directory is
        traverse-only (0711): an agent running as its own uid reaches the socket the runtime
        hands to it, and can neither list nor put anything beside it."""
        from choir.daemon.agents.handler import AgentHandler

        assert self.services is not None
        path = self.home.agent_socket(agent_id)
        if agent_id not in self._agent_sockets:
            handler = AgentHandler(self.services.rpc, self.services.sessions, bound_agent=agent_id)
            server = UdsServer(path, handler, hub=self.hub, limits=AGENT_SOCKET_LIMITS)
            try:
                path.parent.mkdir(mode=0o711, exist_ok=True)
                path.parent.chmod(0o711)
                await server.start()
            except OSError as error:
                if disk_failure(error) is None:
                    raise
                self.disk.note("the agent socket", path, error)
                raise UnavailableError(
                    f"cannot create {agent_id}'s socket {path}: the disk under "
                    f"{self.home.root} is full or failing ({error.strerror}); free space "
                    "and try again (choirctl status shows the disk)"
                ) from None
            self._agent_sockets[agent_id] = server
        return path

    # -- health ----------------------------------------------------------------------------

    def _on_health(self, view: HealthView) -> None:
        """A problem cleared: heartbeats could not be recorded until now, so nobody is stale
        for missing them (the threshold counts from here)."""
        from choir.daemon.sessions.state import utc_now

        if self.services is not None and self.health.healthy:
            self.services.sessions.excuse(utc_now())

    def _disk_paths(self) -> list[Path]:
        """What the disk watch looks at: the home, its logs and database (each may be a file
        system of its own), and every configured workspace."""
        paths = [self.home.root, self.home.logs, self.home.pgdata]
        if self.services is not None:
            workspaces = self.services.stage.running.config.workspaces.values()
            paths += [Path(workspace.path) for workspace in workspaces]
        return paths

    def _watch_log_writes(self) -> Callable[[], None]:
        """Report log lines that cannot be written (choird's own, an agent's copied output) as
        disk problems; returns the callable that stops it."""
        loop = asyncio.get_running_loop()

        def failed(path: Path, error: OSError | None) -> None:
            if not loop.is_closed():  # None: that log is written again
                source = "choird's log" if path == self.home.choird_log else "an agent's log"
                loop.call_soon_threadsafe(self.disk.note, source, path, error)

        previous = set_write_error_hook(failed)

        def stop() -> None:
            set_write_error_hook(previous)

        return stop

    def _healthy_database(self) -> bool:
        return self.health.problem("postgres") is None

    def _on_session_ended(self, ended: SessionEnded) -> None:
        server = self._agent_sockets.pop(ended.agent_id, None)
        if server is not None:
            task = asyncio.get_running_loop().create_task(server.close())
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)

    # -- timers ----------------------------------------------------------------------------

    def _start_timers(self, services: AgentServices) -> list[asyncio.Task[None]]:
        from choir.daemon.images.repo_refresh import fetch_at_start

        config = services.stage.running.config
        reap_every = min(max(config.crash_detection_threshold_ms / 4000, 0.25), 2.0)
        database = self._healthy_database
        tasks = [
            asyncio.create_task(
                _every(reap_every, services.sessions.reap, when=database), name="reaper"
            ),
            asyncio.create_task(
                _every(5.0, services.approvals.expire_overdue, when=database), name="approvals"
            ),
            asyncio.create_task(_every(DISK_CHECK_EVERY_S, self.disk.check), name="disk"),
            asyncio.create_task(
                _every(LIVE_LOG_CHECK_EVERY_S, self._live_logs(services)), name="log-archive"
            ),
            asyncio.create_task(fetch_at_start(self.home, config), name="repo-fetch"),
        ]
        if self.postgres is not None:
            tasks.append(asyncio.create_task(self.postgres.run(), name="postgres"))
        return tasks

    def _live_logs(self, services: AgentServices) -> Callable[[], Awaitable[None]]:
        """Archive the running agents' logs past `log_archive_threshold_lines` (§22.2) — by
        copy and truncate under the writers' lock (`choir.logs.live`), off the event loop."""
        from choir.logs.live import LiveLogArchiver

        archiver = LiveLogArchiver(self.home)

        async def archive_live_logs() -> None:
            config, runtime = services.stage.running.config, self.runtime
            if runtime is None:
                return
            running = [agent for agent in config.agents if runtime.running(agent)]
            if not running:
                return
            threshold = config.log_archive_threshold_lines
            for path in await asyncio.to_thread(archiver.check, running, threshold):
                log.info("agent log archived while running", fields={"path": str(path)})

        return archive_live_logs

    @staticmethod
    async def _cancel_timers(tasks: list[asyncio.Task[None]]) -> None:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def _every(
    seconds: float, job: Callable[[], object], *, when: Callable[[], bool] | None = None
) -> None:
    """Run `job` every `seconds` (skipped while `when` says no); a failure is logged and the
    timer keeps going."""
    while True:
        await asyncio.sleep(seconds)
        if when is not None and not when():
            continue
        try:
            result = job()
            if asyncio.iscoroutine(result):
                await result
        except Exception:
            log.exception("periodic task failed", fields={"task": getattr(job, "__name__", "")})


def _find_sandbox() -> SandboxFound:
    from choir.daemon.runtimes.bwrap import find_sandbox  # with its imports, off the loop

    return find_sandbox()


def _import_all(modules: tuple[str, ...]) -> None:
    for module in modules:
        importlib.import_module(module)


def _host_port(listen: str) -> tuple[str, int]:
    host, _, port = listen.rpartition(":")
    if not port.isdigit():
        raise UsageError(f"--listen {listen!r}: expected HOST:PORT, e.g. 127.0.0.1:9400")
    return host.strip("[]") or "127.0.0.1", int(port)


def _where(target: PostgresTarget) -> Path | str:
    """The data directory of an embedded server, else the external server's address."""
    if isinstance(target, EmbeddedTarget):
        return target.datadir
    return target.params().where


def _target(home: ChoirHome, config: ChoirConfig, secrets: SecretStore) -> PostgresTarget:
    postgres = config.postgres
    if isinstance(postgres, EmbeddedPostgres):
        return EmbeddedTarget(home.pgdata)
    password = secrets.get(postgres.secret).get_secret_value()
    return ExternalTarget(postgres.host, postgres.port, postgres.database, postgres.user, password)
