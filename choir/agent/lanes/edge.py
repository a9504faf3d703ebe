"""The edge lane (§7.2): the conversation with the user, one message per cycle.

    IDLE -> CONTEXT_READY (commit UserMsg) -> REASONING (one LLM call) -> WAITING_TOOL -> ...
         -> FINALIZING (commit AgentReplied) -> IDLE

User messages queue while edge works and are drained only at EDGE_IDLE (a message choird pushes
again, same id, is taken once: choird keeps it until its `user_msg` is durable); `/inject` text is
committed as an `InjectedInstruction` at edge's next safe point (before its next LLM call, or at
once when idle). An LLM failure ends the cycle with an `error` reply (§7.7) — the user
re-triggers; a rate limit first sends one `notice` while the client waits and retries once.
A session budget (tokens, tool calls) or the spend cap that runs out mid-reply pauses the cycle
to ask a human to extend it (`budget_ask`); the reply goes on once extended, else ends with an
`error` reply saying why.
Edge never waits for its core jobs; they report through `core_report` replies.

Before a message's first LLM call edge commits the memories recalled for it (`recall`, design
004: one `MemoryRecalled` event, right after the `UserMsg`); the prompt shows them from working
memory, so a replay of the log shows the same block. A failed or slow recall is an event too,
and the turn goes on without memories.

Graceful stop (`stopping.Drain`): edge takes no new message; a cycle under way finishes the call
it has in flight, then ends at that safe point with an `error` reply saying the message was not
finished (`stopping`, like an LLM error), and edge waits for its jobs to reach theirs.
"""

from __future__ import annotations

import asyncio

from choir.adapters.llm.client import Completion, LlmError
from choir.agent.kernel.commitlog import CommitLog
from choir.agent.kernel.proposal import ToolProposal
from choir.agent.lanes.core.budget_ask import (
    Shortfall,
    asked_notice,
    grant,
    of_budget,
    of_spend,
    resumed_notice,
)
from choir.agent.lanes.core.runner import CoreJobRunner
from choir.agent.lanes.core.stream import BUDGET_EXCEEDED
from choir.agent.lanes.recall import Recall
from choir.agent.lanes.rollup import IdleRollup
from choir.agent.lanes.spend import SpendCapReached
from choir.agent.lanes.support import LaneKit
from choir.core.budgets import SESSION_EXTENDABLE
from choir.core.lane_states import EdgeTrigger, edge_step, is_final
from choir.core.memory.working import WorkingMemory
from choir.core.prompt.build import edge_prompt
from choir.core.prompt.window import ShownEvents
from choir.errors import ChoirError
from choir.failpoints import failpoint
from choir.logs import get_logger
from choir.protocol import (
    EDGE_LANE,
    AgentReplied,
    InjectedInstruction,
    UserMessagePush,
    UserMsg,
)
from choir.protocol.log.lanes import EdgeStatus

log = get_logger("choir.agent.lanes.edge")

STOPPING_TEXT = (
    "I am stopping and could not finish answering; please send your message again when I am back."
)
"""Edge's reply to the message whose cycle a graceful stop ended at its safe point."""


class EdgeLane:
    """The edge lane of one session; `run` is its task."""

    def __init__(
        self,
        kit: LaneKit,
        jobs: CoreJobRunner,
        recall: Recall | None = None,
        rollup: IdleRollup | None = None,
    ) -> None:
        self._kit = kit
        self._jobs = jobs
        self._recall = recall
        """Memories for each message (design 004); None recalls nothing."""
        self._rollup = rollup
        """The idle roll-up (design 004, the summary tree's root), run while waiting for a
        message and cancelled by one; None rolls nothing up."""
        self._cancelled: set[asyncio.Task[None]] = set()
        """Idle roll-ups cancelled by a message, until they have unwound."""
        self.state: EdgeStatus = "EDGE_IDLE"
        self._inbox: asyncio.Queue[UserMessagePush] = asyncio.Queue()
        self._injections: list[str] = []
        self._seen = committed_message_ids(kit.kernel.log)
        """Message ids already taken: choird pushes a message again until its `user_msg` is
        durable (`daemon.inbox`), so a resumed agent may be offered one its log already has."""
        self._answering: str | None = None
        """The message id of the cycle under way."""
        self._shown = ShownEvents()
        """The window's events as messages, kept from one call's prompt to the next."""
        kit.memories.track(WorkingMemory(EDGE_LANE).observe_all(kit.kernel.log))

    def submit(self, push: UserMessagePush) -> None:
        """Queue a user message; a re-delivered one (same message id) is dropped."""
        if push.message_id in self._seen:
            return
        self._seen.add(push.message_id)
        self._inbox.put_nowait(push)

    def inject(self, text: str) -> None:
        """`/inject`: committed now when idle, else at the next safe point."""
        self._injections.append(text)
        if self.state == "EDGE_IDLE":
            self._drain()

    async def run(self) -> None:
        """Serve messages until cancelled or a graceful stop settled; the core jobs end with it."""
        self._kit.report(EDGE_LANE, self.state)
        warming = asyncio.create_task(self._recall.warm()) if self._recall is not None else None
        try:
            while (push := await self._next()) is not None:
                self._answering = push.message_id
                await self._cycle(push)
                self._answering = None
            if self._inbox.qsize():
                log.info("stopping with messages unread", fields={"count": self._inbox.qsize()})
            await self._jobs.settled()
        finally:
            if warming is not None:
                warming.cancel()
            await self._jobs.cancel_all("the agent is stopping")
            self._end()

    async def _next(self) -> UserMessagePush | None:
        """The next user message, or None once the agent is stopping."""
        drain = self._kit.drain
        if drain.draining:
            return None
        if not self._inbox.empty():
            return self._inbox.get_nowait()
        message = asyncio.ensure_future(self._inbox.get())
        stopping = asyncio.ensure_future(drain.wait())
        idle = self._idle()
        try:
            await asyncio.wait({message, stopping}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopping.cancel()
            message.cancel()
            if idle is not None:  # not awaited: the message is not kept waiting for it
                idle.cancel()
        return None if drain.draining or message.cancelled() else message.result()

    def _idle(self) -> asyncio.Task[None] | None:
        """The idle roll-up, started beside the wait for a message."""
        if self._rollup is None:
            return None
        task = asyncio.get_running_loop().create_task(self._rollup.while_idle(), name="rollup")
        self._cancelled.add(task)
        task.add_done_callback(self._cancelled.discard)
        return task

    def _end(self) -> None:
        """Edge's last move: after its safe point, or cancelled mid-cycle (the user is told)."""
        if is_final(self.state):
            return
        if self.state == "EDGE_IDLE":
            self._move("shutdown")
            return
        self._move("cancel")
        text = "I was stopped before I could finish answering; please send your message again."
        reply = AgentReplied(text=text, category="error", in_reply_to=self._answering)
        self._kit.kernel.arbiter.commit(EDGE_LANE, reply)

    async def _cycle(self, push: UserMessagePush) -> None:
        kit, arbiter = self._kit, self._kit.kernel.arbiter
        self._move("user_message")
        message = UserMsg(text=push.text, attachments=push.attachments, message_id=push.message_id)
        arbiter.commit(EDGE_LANE, message)
        if self._recall is not None:
            recalled = await self._recall(push.text, push.message_id)
            if recalled is not None:
                arbiter.commit(EDGE_LANE, recalled)
                await failpoint("edge.after_recall")
        self._move("context_ready")

        async def rate_limited(wait_s: float) -> None:
            notice = f"The model is rate limited; trying once more in {wait_s:.0f} s."
            arbiter.commit(EDGE_LANE, AgentReplied(text=notice, category="notice"))

        while True:
            if kit.drain.draining:
                self._finish("stopping", STOPPING_TEXT, "error", push.message_id)
                return
            self._drain()
            exceeded = arbiter.policy.begin_step_or_exceeded(EDGE_LANE)
            if exceeded is not None:
                if await self._paused(of_budget(exceeded, None), push.message_id):
                    continue
                return
            tools = self._tools()
            try:
                completion = await kit.complete(EDGE_LANE, self._prompt(tools), tools, rate_limited)
            except SpendCapReached as capped:
                if await self._paused(of_spend(capped, None), push.message_id):
                    continue
                return
            except (LlmError, ChoirError) as error:
                self._finish("llm_error", error.message, "error", push.message_id)
                return
            calls = kit.record(EDGE_LANE, completion)
            if not calls and not completion.invalid_tool_calls:
                self._finish("finish", _reply_text(completion), "reply", push.message_id)
                return
            self._move("tool_proposal")
            over: object = None
            for call in calls:
                proposal = ToolProposal(EDGE_LANE, call.id, call.name, call.arguments)
                result = await arbiter.propose(proposal)
                if result.error_code == BUDGET_EXCEEDED and over is None:
                    over = result.data.get("budget")
            self._move("tool_result")
            if isinstance(over, str) and over in SESSION_EXTENDABLE:
                # the step's other calls got their answers: a safe point to ask at
                short = of_budget(arbiter.policy.exceeded(over, None), None)
                if not await self._paused(short, push.message_id):
                    return

    async def _paused(self, short: Shortfall, message_id: str | None) -> bool:
        """Ask a human to extend what ran out mid-reply: True once extended (the cycle goes
        on), False when the cycle ended (not extended, no one to ask, or a graceful stop)."""
        kit, policy = self._kit, self._kit.kernel.arbiter.policy
        asker = self._jobs.asker
        if not asker.can_ask or kit.drain.draining:
            self._finish("llm_error", short.message, "error", message_id)
            return False
        self._move("budget_ask")
        answer = await asker.ask(short, kit.drain, self._asked)
        if kit.drain.draining:
            self._finish("stopping", STOPPING_TEXT, "error", message_id)
            return False
        if answer.granted is None:
            self._finish("not_extended", f"{short.message}; {answer.why}", "error", message_id)
            return False
        grant(short, answer.granted, policy, kit.spend)
        self._move("budget_extended")
        self._tell(resumed_notice(short, answer.granted))
        return True

    def _asked(self, approval_id: str, short: Shortfall) -> None:
        self._tell(asked_notice(approval_id, short))

    def _tell(self, text: str) -> None:
        self._kit.kernel.arbiter.commit(EDGE_LANE, AgentReplied(text=text, category="notice"))

    @property
    def kit(self) -> LaneKit:
        """The lanes' shared machinery (the push handlers reach compaction through it)."""
        return self._kit

    def _prompt(self, tools: list[dict[str, object]]) -> list[dict[str, object]]:
        """The next call's messages; measuring them is compaction's trigger (§11.3)."""
        kit = self._kit
        prompt = edge_prompt(
            kit.memories.lanes[EDGE_LANE],
            user_md=kit.identity.user_md,
            soul_md=kit.identity.soul_md,
            skills=kit.skills(),
            skill_view=kit.skill_view(EDGE_LANE),
            window_size=kit.window_size,
            result_view=kit.kernel.registry.result_for_prompt,
            shown=self._shown,
        )
        kit.compaction.measure(EDGE_LANE, prompt.size(tools))
        return list(prompt.messages)

    def _tools(self) -> list[dict[str, object]]:
        return self._kit.tools(EDGE_LANE)

    def _finish(
        self, trigger: EdgeTrigger, text: str, category: str, in_reply_to: str | None
    ) -> None:
        self._move(trigger)
        reply = AgentReplied.model_validate(
            {"text": text, "category": category, "in_reply_to": in_reply_to}
        )
        self._kit.kernel.arbiter.commit(EDGE_LANE, reply)
        self._move("delivered")
        self._prompt(self._tools())  # measure the finished cycle: a due fold runs while idle

    def _drain(self) -> None:
        """Edge's safe point: commit the instructions the user injected."""
        while self._injections:
            content = self._injections.pop(0)
            event = InjectedInstruction(target=EDGE_LANE, content=content, source="user")
            self._kit.kernel.arbiter.commit(EDGE_LANE, event)

    def _move(self, trigger: EdgeTrigger) -> None:
        self.state = edge_step(self.state, trigger)
        self._kit.report(EDGE_LANE, self.state)


def committed_message_ids(log: CommitLog) -> set[str]:
    """The ids of the user messages `log` holds (those after its snapshot, if restored)."""
    return {
        str(entry.event["message_id"])
        for entry in log
        if entry.kind == "user_msg" and entry.event.get("message_id")
    }


def _reply_text(completion: Completion) -> str:
    return completion.text.strip() or "(the model gave an empty answer)"
