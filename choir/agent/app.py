"""The choir-agent process (§7.1, §13.2, §17.2): start-up, the lanes, the pushes, graceful stop.

    arm failpoints -> connect -> INIT_HELLO (plain JSON) -> the wire models, lanes and kernel load
    -> the answer parsed -> the handover's rest, ConfigSync.load (config + secrets, memory only);
       INIT_HELLO and these steps each wait out a choird restart (start_retry.py)
    -> rehydrate the log when resuming -> git identity + credential socket (git_identity.py)
    -> Replicator -> kernel (intent sink = replicator)
    -> edge lane task (core jobs are its children) + push pump
    ... shutdown push or SIGTERM ...
    -> graceful stop (stopping.py): lanes finish their safe point within stop_timeout_ms, else
       are cancelled -> session summary -> flush the replicator -> TERMINATE_SELF

Pushes are dispatched as they arrive: user messages queue for edge, `/inject` reaches edge's
next safe point, cancels reach their job, approvals the arbiter, config and secret changes the
config sync. Choird only learns what the agent did through replication, so the log is flushed
before TERMINATE_SELF.
"""

from __future__ import annotations

import asyncio
import gc
import importlib
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from choir.agent.start_retry import StartPatience
from choir.agent.startup import AgentOptions, open_client, say_hello
from choir.agent.stopping import Drain
from choir.errors import ChoirError
from choir.failpoints import arm_from_env, failpoint
from choir.logs import get_logger, set_context
from choir.logs.last_words import START_FAILED

if TYPE_CHECKING:
    from choir.agent.kernel.arbiter import Arbiter
    from choir.agent.kernel.dispatch import LaneHook
    from choir.agent.kernel.proposal import ToolProposal
    from choir.agent.lanes.core.runner import CoreJobRunner
    from choir.agent.lanes.edge import EdgeLane
    from choir.agent.lanes.support import LaneKit
    from choir.agent.recovery.resume import CoreJobRecovery
    from choir.agent.recovery.session import RestoredSession
    from choir.agent.replication.config_sync import ConfigSync
    from choir.agent.replication.control_plane import ControlPlane
    from choir.agent.replication.replicator import ReplicationFatal, Replicator
    from choir.protocol import ServerPush, ToolResult
    from choir.protocol.wire.payloads import SummaryOutcome
    from choir.transport import Client

log = get_logger("choir.agent")

SUMMARY_TIMEOUT_MS = 30_000
"""The session summary's budget when neither the shutdown push nor config gives one (§11.8)."""

PUSH_RETRY_S = 0.5
"""Pause before subscribing to pushes again after the channel broke."""

START_FAILED_TIMEOUT_S = 5.0
"""How long the agent tries to tell choird its start failed before it exits anyway."""

AFTER_HELLO: Final = (
    "choir.adapters.llm.client",
    "choir.agent.git_identity",
    "choir.agent.integrations.session",
    "choir.agent.lanes.core.jobs",
    "choir.agent.lanes.edge",
    "choir.agent.lanes.summary",
    "choir.agent.lanes.working_query",
    "choir.agent.recovery.fetch",
    "choir.agent.recovery.resume",
    "choir.agent.recovery.session",
    "choir.agent.replication.config_sync",
    "choir.agent.replication.control_plane",
    "choir.agent.replication.replicator",
    "choir.agent.replication.status",
    "choir.agent.stopping",
    "choir.agent.wiring",
)
"""What serving needs beyond INIT_HELLO (pydantic and the wire models, the lanes, the LLM
client, the kernel and its tool registry): imported once INIT_HELLO is answered, so choird hears
from a new agent as soon as its interpreter and the transport are up; the answer is parsed once
they are loaded. Not in a thread: nothing else would run meanwhile, and the answer needs them."""


def collect_from_now() -> None:
    """Garbage collection on again (`choir_agent.main` turns it off for the start-up's
    imports), what they loaded frozen: it lives as long as the agent, and no collection needs
    to scan it again."""
    if not gc.isenabled():
        gc.freeze()
        gc.enable()


def import_after_hello() -> None:
    """Load `AFTER_HELLO`. An image's build runs it too (Dockerfile.base): the first import of a
    module with wire or config models leaves their field docstrings beside its bytecode
    (`choir.protocol.docstring_cache`), which a container's read-only filesystem cannot."""
    for module in AFTER_HELLO:
        importlib.import_module(module)


class ChoirAgent:
    """One agent process serving one session; `run` returns the exit code."""

    def __init__(self, options: AgentOptions) -> None:
        self.options = options
        self._stop = asyncio.Event()
        self._reason = "stopped"
        self._fatal: ReplicationFatal | None = None
        self._summary_timeout_ms: int | None = None
        """The shutdown push's summary budget; None uses config's `summary_timeout_ms`."""
        self._background: set[asyncio.Task[bool]] = set()
        self._recovery: CoreJobRecovery | None = None
        """The core jobs, holding those a crash left waiting for the operator's decision."""
        self._drain = Drain()
        """The lanes' view of the graceful stop; a second stop request hurries it."""
        self._summary: SummaryOutcome | None = None
        """How the graceful stop's session summary went, for TERMINATE_SELF."""
        self._serving = False
        """Set once the lanes run: a failure before is a failed start (or resume)."""

    def request_stop(self, reason: str, *, resumes: bool = False) -> None:
        """Graceful stop (§17.2): SIGTERM, or a `shutdown` push; a second request hurries it."""
        self._drain.begin(reason, resumes=resumes)
        if not self._stop.is_set():
            log.info("stopping", fields={"reason": reason, "resumes": resumes})
            self._reason = reason
            self._stop.set()

    async def run(self) -> int:
        arm_from_env()
        options = self.options
        set_context(session_id=options.session_id)
        client = await open_client(options)
        control_plane: ControlPlane | None = None
        patience = StartPatience(options.agent_id)  # choird may restart while the agent starts
        try:
            said = await say_hello(client, options, patience)
            import_after_hello()
            from choir.agent.git_identity import git_identity
            from choir.agent.lanes.support import redact_secrets
            from choir.agent.recovery.fetch import complete_handover
            from choir.agent.recovery.session import RestoredSession
            from choir.agent.replication.config_sync import ConfigSync
            from choir.agent.replication.control_plane import ControlPlane, init_hello_answer
            from choir.agent.replication.live_config import DynamicState
            from choir.protocol import TerminateSelfRequest

            control_plane = ControlPlane(client)
            answer = init_hello_answer(said)
            collect_from_now()
            log.info("session started", fields={"status": answer.status})
            await failpoint("agent.after_hello")
            answer, artifacts = await patience.run(
                partial(complete_handover, control_plane, answer), "fetching the handover"
            )
            state = DynamicState()
            async with ConfigSync(control_plane, state) as sync:
                await patience.run(sync.load, "loading the config")
                redact_secrets(state.secrets())
                state.subscribe_secrets(redact_secrets)
                restored = RestoredSession(answer, artifacts)
                async with git_identity(state, Path.home()):
                    await self._replicate(control_plane, sync, restored)
            if self._fatal is not None:
                return 1
            request = TerminateSelfRequest(reason=self._reason, summary=self._summary)
            await control_plane.terminate_self(request)
            log.info("terminated", fields={"reason": self._reason})
            return 0
        except ChoirError as error:
            if not self._serving:
                await _start_failed(control_plane or _control_plane(client), error)
            raise
        finally:
            await client.close()

    async def _replicate(
        self, control_plane: ControlPlane, sync: ConfigSync, restored: RestoredSession
    ) -> None:
        from choir.agent.replication.replicator import ReplicationError, Replicator

        replicator = Replicator(
            restored.log,
            control_plane,
            sync,
            on_fatal=self._on_fatal,
            snapshot_provider=restored.take,
        )
        await replicator.start()
        try:
            await self._serve(control_plane, sync, restored, replicator)
        finally:
            try:
                await replicator.stop(flush=self._fatal is None)
            except ReplicationError as error:
                log.error("log not flushed before stopping", fields={"error": error.message})

    def _on_fatal(self, fatal: ReplicationFatal) -> None:
        self._fatal = fatal
        self.request_stop(f"replication failed: {fatal.message}")

    async def _serve(
        self,
        control_plane: ControlPlane,
        sync: ConfigSync,
        restored: RestoredSession,
        replicator: Replicator,
    ) -> None:
        from choir.adapters.llm.client import LlmClient
        from choir.agent.integrations.session import Integrations
        from choir.agent.lanes.core.budget_ask import BudgetAsk
        from choir.agent.lanes.core.jobs import CoreJobTools
        from choir.agent.lanes.core.runner import CoreJobRunner
        from choir.agent.lanes.edge import EdgeLane
        from choir.agent.lanes.recall import Recall
        from choir.agent.lanes.rollup import IdleRollup
        from choir.agent.lanes.support import (
            DemoModel,
            Identity,
            LaneKit,
            bound_secrets,
        )
        from choir.agent.lanes.working_query import working_query_hook
        from choir.agent.recovery.resume import CoreJobRecovery, settle_edge
        from choir.agent.replication.control_plane import ControlPlaneHostBridge
        from choir.agent.replication.job_tokens import JobTokens
        from choir.agent.replication.status import StatusReporter
        from choir.agent.startup import LANE_TOOLS, runtime_tools
        from choir.agent.stopping import lanes_stopped
        from choir.agent.wiring import open_kernel
        from choir.core.integrations import INTEGRATION_TOOLS, NOT_IN_THIS_VERSION

        options, state, commit_log = self.options, sync.state, restored.log
        table: dict[str, LaneHook] = {}
        hooks = {name: _late(table, name) for name in LANE_TOOLS | INTEGRATION_TOOLS}
        tokens = JobTokens(options.lease_token, options.session_id)
        bridge = ControlPlaneHostBridge(control_plane, tokens)
        settle_edge(commit_log, restored.ledger)  # before the arbiter folds its idempotency table
        async with (
            LlmClient() as llm,
            open_kernel(
                options.root,
                options.workspace,
                limits=state.current().budget_limits(),
                lane_hooks=hooks,
                runtime_tools=runtime_tools(),
                unavailable=NOT_IN_THIS_VERSION,
                host=bridge,
                secrets=lambda: bound_secrets(state),
                log=commit_log,
                intent_sink=replicator.make_durable,
            ) as kernel,
        ):
            demo, status = DemoModel(), StatusReporter(control_plane)
            identity = Identity.read(options.root)
            integrations = Integrations(state, kernel.registry, kernel.workspace)
            kit = LaneKit(
                kernel,
                llm,
                state,
                demo,
                identity,
                status,
                drain=self._drain,
                withheld=integrations.withheld,
                session_id=options.session_id,
            )
            kit.spend.begin(options.agent_id, restored.spend)
            kit.start()
            jobs = CoreJobRunner(kit, BudgetAsk(bridge))
            tokens.job_of = jobs.job_of
            tools = CoreJobTools(kit, jobs)
            recovery = self._recovery = CoreJobRecovery(kit, jobs, restored.ledger)
            table.update(tools.hooks())

            async def host_query(proposal: ToolProposal, arguments: dict[str, Any]) -> ToolResult:
                return await bridge.execute_host_tool(
                    proposal.tool, proposal.call_id, arguments, lane=proposal.lane
                )

            table["choir.memory.query"] = working_query_hook(
                commit_log,
                agent_id=options.agent_id,
                fallback=host_query,
                result_view=kernel.registry.result_for_prompt,
            )
            table["choir.memory.compact"] = kit.compaction.hook
            table.update(integrations.hooks())
            kernel.arbiter.add_gate(self._drain.gate)
            kernel.arbiter.add_gate(integrations.gate)
            kernel.arbiter.add_gate(tools.gate)
            config = lambda: state.current().data  # noqa: E731 - read at each use: it changes
            edge = EdgeLane(kit, jobs, Recall(bridge, config), IdleRollup(kit, bridge, config))
            restored.attach(kit, edge, recovery)  # budgets, skills, memories: before lanes run
            resumed = recovery.resume_open()
            recovery.announce_held(options.session_id)
            if resumed or recovery.held:
                held = [*recovery.held]
                log.info("core jobs recovered", fields={"resumed": resumed, "held": held})
            try:
                await self._until_stopped(edge, jobs, kernel.arbiter, sync, control_plane)
                lanes_stopped(kernel)
                await self._summarize(kit)
            finally:
                await kit.compaction.close()
                await status.close()
                kit.stop()
                await demo.close()
                await integrations.close()

    async def _summarize(self, kit: LaneKit) -> None:
        """Graceful stop, after the lanes ended: commit the session summary (§11.8), if any."""
        from choir.agent.lanes.summary import summarize_at_stop

        await kit.compaction.close()
        if self._fatal is not None:
            return
        timeout_ms = self._summary_timeout_ms
        if timeout_ms is None:
            configured = kit.state.current().data.get("summary_timeout_ms")
            timeout_ms = configured if isinstance(configured, int) else SUMMARY_TIMEOUT_MS
        self._summary = await summarize_at_stop(kit, timeout_ms, self._drain)

    async def _until_stopped(
        self,
        edge: EdgeLane,
        jobs: CoreJobRunner,
        arbiter: Arbiter,
        sync: ConfigSync,
        control_plane: ControlPlane,
    ) -> None:
        from choir.agent.stopping import settle

        self._serving = True
        edge_task = asyncio.create_task(edge.run(), name="edge")
        pump = asyncio.create_task(
            self._pump(control_plane, edge, jobs, arbiter, sync), name="pushes"
        )
        stopped = asyncio.create_task(self._stop.wait(), name="stop")
        try:
            await asyncio.wait({edge_task, pump, stopped}, return_when=asyncio.FIRST_COMPLETED)
            if stopped.done() and not edge_task.done():
                await settle(edge_task, self._drain, sync.state)
        finally:
            for task in (edge_task, pump, stopped):
                task.cancel()
            results = await asyncio.gather(edge_task, pump, stopped, return_exceptions=True)
        for name, result in zip(("edge", "pushes"), results, strict=False):
            if isinstance(result, Exception):
                log.error(f"{name} task failed", exc_info=result)
                self.request_stop(f"the {name} task failed: {result}")

    async def _pump(
        self,
        control_plane: ControlPlane,
        edge: EdgeLane,
        jobs: CoreJobRunner,
        arbiter: Arbiter,
        sync: ConfigSync,
    ) -> None:
        """Dispatch choird's pushes for the life of the process, resubscribing after a loss."""
        from choir.transport import RpcError, TransportError

        after_seq = 0
        while True:
            try:
                async for envelope in control_plane.pushes(after_seq=after_seq):
                    after_seq = envelope.seq
                    self._dispatch(envelope.push, edge, jobs, arbiter, sync)
            except (TransportError, RpcError) as error:
                log.warning("push channel lost; resubscribing", fields={"error": str(error)})
            await asyncio.sleep(PUSH_RETRY_S)

    def _dispatch(
        self,
        push: ServerPush,
        edge: EdgeLane,
        jobs: CoreJobRunner,
        arbiter: Arbiter,
        sync: ConfigSync,
    ) -> None:
        from choir.agent.stopping import RESUMING_REASONS
        from choir.protocol import (
            ApprovalResolvedPush,
            CompactPush,
            ConfigChangedPush,
            CoreCancelPush,
            CoreInjectPush,
            InjectPush,
            SecretsRefreshedPush,
            ShutdownPush,
            UserMessagePush,
        )
        from choir.protocol.wire.pushes import RecoverPush

        match push:
            case UserMessagePush():
                edge.submit(push)
            case InjectPush(text=text):
                edge.inject(text)
            case CoreInjectPush(job_name=name, text=text):
                refused = jobs.inject(name, text, "user")
                if refused is not None:
                    log.info("instruction for a core job refused", fields={"why": refused})
                else:  # nothing is committed until the job's next step reads it
                    log.info("instruction for a core job queued", fields={"job": name})
            case CoreCancelPush(job_name=name, reason=reason):
                if not jobs.cancel(name, reason):
                    log.info("cancel for a job that is not running", fields={"job": name})
            case ApprovalResolvedPush(approval_id=approval_id, status=status, reason=reason):
                if not jobs.asker.answered(push):  # a paused job's budget question, else a proposal
                    arbiter.resolve_approval(approval_id, status, reason)
            case ConfigChangedPush():
                sync.notice(push)
            case SecretsRefreshedPush():
                sync.notice(push)  # the swap refreshes the redaction set (subscribe_secrets)
            case ShutdownPush(reason=reason, summary_timeout_ms=summary_ms):
                self._summary_timeout_ms = summary_ms
                self.request_stop(f"shutdown ({reason})", resumes=reason in RESUMING_REASONS)
            case RecoverPush(choice=choice, job_name=name) if self._recovery is not None:
                self._recovery.decide(choice, name)
            case CompactPush(lane=lane):
                reached = edge.kit.compaction.request(lane)
                log.info("compaction requested", fields={"lanes": reached})


def _control_plane(client: Client) -> ControlPlane:
    """The typed control plane over `client`, for a start that failed before it was made."""
    import_after_hello()
    from choir.agent.replication.control_plane import ControlPlane

    return ControlPlane(client)


async def _start_failed(control_plane: ControlPlane, error: ChoirError) -> None:
    """Tell choird why this session could not start or resume, so whoever started the agent
    hears it (best effort: choird may be what failed)."""
    from choir.protocol import TerminateSelfRequest

    # before choird; a choird that was away reads this line back (last_words)
    log.error(START_FAILED, fields={"error": error.message})
    request = TerminateSelfRequest(reason=error.message, failed=True)  # ends it (and this process)
    try:
        async with asyncio.timeout(START_FAILED_TIMEOUT_S):
            await control_plane.terminate_self(request)
    except (ChoirError, TimeoutError) as reported:
        log.warning("could not tell choird the start failed", fields={"error": str(reported)})


def _late(table: dict[str, LaneHook], name: str) -> LaneHook:
    """A hook resolved when called: lane hooks exist only once the kernel they use is open."""

    async def hook(proposal: ToolProposal, arguments: dict[str, Any]) -> ToolResult:
        return await table[name](proposal, arguments)

    return hook


__all__ = ["AgentOptions", "ChoirAgent"]
