"""The async client of choird's operator socket, shared by choirctl and the TUI.

One method per operator verb, typed by the contract in `choir.protocol.operator`: each answer
(and stream item) is parsed into its model, so callers read attributes, and `--json` prints the
model's `model_dump(mode="json")` — the bytes choird sent. `call`/`stream` take any verb (by its
`OperatorVerb` or its string) and return the JSON as is. Refusals arrive as the operator-facing
errors of `choir.errors`, so a caller can
`except NotFoundError` and choirctl exits with the documented code: not found 4, conflict 5,
invalid arguments 2, invalid config 3, choird unreachable 6.

    async with await ChoirClient.connect(ChoirHome.resolve()) as choird:
        print((await choird.status()).config_version)
        async for item in choird.logs("choird"):
            ...
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, Callable, Mapping
from functools import cache
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self, TypeAlias, TypedDict, TypeVar

from choir.errors import ChoirError, ConfigError, UnavailableError, error_class
from choir.home import ChoirHome
from choir.lazy import LazyModule
from choir.protocol.operator.verbs import OperatorVerb
from choir.transport import CallTimeout, Client, RpcError, TransportError, connect

if TYPE_CHECKING:
    from pydantic import TypeAdapter

    from choir.protocol.base import WireModel
    from choir.protocol.operator import answers as a
    from choir.protocol.operator import items as i
    from choir.protocol.operator import views as v
    from choir.protocol.operator.requests import InboxChoice, RecoverChoice
else:  # the models (and pydantic) load with the first typed answer, not with the client
    a = LazyModule("choir.protocol.operator.answers")
    v = LazyModule("choir.protocol.operator.views")

Payload = dict[str, Any]
Progress: TypeAlias = "Callable[[i.Progress], None]"
"""Receives the progress items of a long verb (`agent_update`…) as they arrive."""
A = TypeVar("A", bound="WireModel")
I = TypeVar("I")  # noqa: E741
V = OperatorVerb


def operator_error(error: RpcError) -> ChoirError:
    """The `choir.errors` class matching a refusal's code (`choir.errors.error_class`), with
    its one-line message."""
    return error_class(error.code)(error.message)


class ChoirClient:
    """A connection to choird's operator socket; create it with `await ChoirClient.connect()`."""

    def __init__(self, client: Client, socket: Path) -> None:
        self.socket = socket
        """The operator socket connected to."""
        self._client = client

    @classmethod
    async def connect(
        cls, home: ChoirHome | None = None, *, call_timeout: float | None = 30.0
    ) -> Self:
        """Connect to `$CHOIR_HOME/socks/choird.sock`; UnavailableError if choird is not up."""
        socket = (home or ChoirHome.resolve()).operator_socket
        if not socket.exists():
            raise UnavailableError(
                f"choird is not running (no socket at {socket}): start it with `choir up` "
                "(or `choird` in the foreground)"
            )
        try:
            client = await connect(socket, call_timeout=call_timeout)
        except TransportError:
            raise UnavailableError(
                f"choird is not running (nothing listens on {socket}): start it with `choir up` "
                "(or `choird` in the foreground)"
            ) from None
        return cls(client, socket)

    async def close(self) -> None:
        await self._client.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def call(self, verb: OperatorVerb | str, **payload: Any) -> Payload:
        """Any operator verb; arguments that are None are left out."""
        try:
            return await self._client.call(verb, _present(payload))
        except RpcError as error:
            raise operator_error(error) from None
        except CallTimeout:
            raise
        except TransportError as error:  # choird died or stopped mid-call
            raise TransportError(_went_away(verb, error)) from None

    async def stream(
        self, verb: OperatorVerb | str, **payload: Any
    ) -> AsyncGenerator[Payload, None]:
        """A streaming verb's items; close the generator to stop choird's side."""
        items = self._client.stream(verb, _present(payload))
        async with contextlib.aclosing(items):
            try:
                async for item in items:
                    yield item
            except RpcError as error:
                raise operator_error(error) from None

    async def ask(self, verb: OperatorVerb, answer: type[A], **payload: Any) -> A:
        """A verb's answer parsed as `answer` (its model in `OPERATOR_MODELS`)."""
        return answer.model_validate(await self.call(verb, **payload))

    async def items(
        self, verb: OperatorVerb, item: TypeAdapter[I], **payload: Any
    ) -> AsyncGenerator[I, None]:
        """A streaming verb's items parsed with `item`; close the generator to stop it."""
        async with contextlib.aclosing(self.stream(verb, **payload)) as items:
            async for raw in items:
                yield item.validate_python(raw)

    # choird and agents

    async def status(self) -> a.StatusAnswer:
        return await self.ask(V.STATUS, a.StatusAnswer)

    async def agent_list(self) -> a.AgentList:
        return await self.ask(V.AGENT_LIST, a.AgentList)

    async def agent_status(self, agent_id: str) -> a.AgentStatus:
        return await self.ask(V.AGENT_STATUS, a.AgentStatus, agent_id=agent_id)

    async def agent_start(
        self,
        agent_id: str,
        overrides: Mapping[str, str | None] | None = None,
        *,
        new_session: bool = False,
        resume: str | None = None,
        memory_key: bytes | None = None,
    ) -> a.AgentStarted:
        """Start the agent (§17.1); `overrides` maps a role (`dm`, `llm`…) to a name;
        `memory_key` (32 bytes) opens its encrypted memories."""
        chosen = {role: name for role, name in (overrides or {}).items() if name is not None}
        key = {} if memory_key is None else {"memory_key": memory_key.hex()}
        started = await self.call(
            V.AGENT_START,
            agent_id=agent_id,
            overrides=chosen,
            new_session=new_session,
            resume=resume,
            **key,
        )
        # `ask` would load the answer models (~35 ms of CPU in a fresh client) before sending;
        # here they load once choird answered: it has the request, and the agent runs, sooner
        return a.AgentStarted.model_validate(started)

    async def agent_stop(self, agent_id: str) -> a.AgentStopped:
        """Graceful stop (§17.2); answers when the agent's process has exited."""
        return await self.ask(V.AGENT_STOP, a.AgentStopped, agent_id=agent_id)

    async def agent_verify(self, agent_id: str) -> v.VerifyReport:
        """The running agent checked against the declared security profile (§15.3)."""
        return await self.ask(V.AGENT_VERIFY, v.VerifyReport, agent_id=agent_id)

    async def agent_restart(self, agent_id: str) -> a.AgentRestarted:
        """Stop, then start the same session with the same bindings."""
        return await self.ask(V.AGENT_RESTART, a.AgentRestarted, agent_id=agent_id)

    async def agent_build(self, agent_id: str, progress: Progress | None = None) -> a.ImageBuilt:
        """Build the agent's image if anything changed (§17.3).

        `progress` receives each of the ten steps and the docker build's output lines."""
        items = self.items(V.AGENT_BUILD, _adapter(V.AGENT_BUILD), agent_id=agent_id)
        result = await self._reported(items, progress)
        assert isinstance(result, _items().BuildResult)
        answer: a.ImageBuilt = result.result
        return answer

    async def agent_update(
        self, agent_id: str, progress: Progress | None = None
    ) -> a.UpdateOutcome:
        """Build if needed, then redeploy resuming the session (§17.4).

        `progress` receives each step (a build's output lines too) as it happens."""
        items = self.items(V.AGENT_UPDATE, _adapter(V.AGENT_UPDATE), agent_id=agent_id)
        result = await self._reported(items, progress)
        assert isinstance(result, _items().UpdateResult)
        answer: a.UpdateOutcome = result.result
        return answer

    async def agent_rollback(
        self, agent_id: str, to: str | None = None, progress: Progress | None = None
    ) -> a.RolledBack:
        """Redeploy the previous kept image, or the image or commit `to` names, resuming the
        session; `progress` receives each step (a commit's build too)."""
        items = self.items(V.AGENT_ROLLBACK, _adapter(V.AGENT_ROLLBACK), agent_id=agent_id, to=to)
        result = await self._reported(items, progress)
        assert isinstance(result, _items().RollbackResult)
        answer: a.RolledBack = result.result
        return answer

    async def agent_update_all(self, progress: Progress | None = None) -> a.UpdateAll:
        """`agent_update` for every agent in turn (§17.5)."""
        items = self.items(V.AGENT_UPDATE_ALL, _adapter(V.AGENT_UPDATE_ALL))
        result = await self._reported(items, progress)
        assert isinstance(result, _items().UpdateAllResult)
        answer: a.UpdateAll = result.result
        return answer

    async def memory_reembed(
        self,
        agent_id: str | None,
        *,
        all_agents: bool = False,
        missing: bool = False,
        progress: Progress | None = None,
    ) -> a.MemoryReembedded:
        """Re-embed an agent's memory (every agent's: `all_agents`) with the configured model,
        or only its rows without a vector (`missing`); resumable (§11.9).

        `progress` receives the vectors stored so far after each page."""
        items = self.items(
            V.MEMORY_REEMBED,
            _adapter(V.MEMORY_REEMBED),
            **_present({"agent_id": agent_id}),
            all=all_agents,
            missing=missing,
        )
        result = await self._reported(items, progress)
        assert isinstance(result, _items().ReembedResult)
        answer: a.MemoryReembedded = result.result
        return answer

    async def session_messages(
        self, session_id: str, *, offset: int = 0, limit: int = 50
    ) -> a.SessionMessages:
        """A page of the session's messages after revision `offset`; read on from
        `next_offset`."""
        return await self.ask(
            V.SESSION_MESSAGES,
            a.SessionMessages,
            session_id=session_id,
            offset=offset,
            limit=limit,
        )

    async def memory_backfill_tools(
        self, agent_id: str | None, *, all_agents: bool = False, progress: Progress | None = None
    ) -> a.MemoryToolsBackfilled:
        """Give an agent's closed sessions (every agent's: `all_agents`) the tool-call rows they
        lack; idempotent. `progress` receives the sessions done after each one."""
        items = self.items(
            V.MEMORY_BACKFILL_TOOLS,
            _adapter(V.MEMORY_BACKFILL_TOOLS),
            **_present({"agent_id": agent_id}),
            all=all_agents,
        )
        result = await self._reported(items, progress)
        assert isinstance(result, _items().BackfillToolsResult)
        answer: a.MemoryToolsBackfilled = result.result
        return answer

    async def shutdown(self) -> a.ChoirdShutdown:
        """Stop choird (it stops its agents gracefully first)."""
        return await self.ask(V.SHUTDOWN, a.ChoirdShutdown)

    async def choird_restart(self) -> a.ChoirdRestarting:
        """Restart choird in place (same pid), its agents left running for it to adopt."""
        return await self.ask(V.CHOIRD_RESTART, a.ChoirdRestarting)

    @staticmethod
    async def _reported(items: AsyncGenerator[Any, None], progress: Progress | None) -> WireModel:
        """The result item of a reporting stream, handing its progress items to `progress`."""
        async with contextlib.aclosing(items):
            async for item in items:
                if not isinstance(item, _items().Progress):
                    result: WireModel = item
                    return result
                if progress is not None:
                    progress(item)
        raise UnavailableError("choird closed the stream before answering: see choirctl logs")

    # sessions

    async def session_list(self, agent_id: str | None = None, *, limit: int = 50) -> a.SessionList:
        return await self.ask(V.SESSION_LIST, a.SessionList, agent_id=agent_id, limit=limit)

    async def session_events(
        self, session_id: str, *, from_rev: int | None = None, limit: int = 100
    ) -> a.SessionEvents:
        """`limit` events from `from_rev`, else the last; read on from `next_rev`."""
        return await self.ask(
            V.SESSION_EVENTS, a.SessionEvents, session_id=session_id, from_rev=from_rev, limit=limit
        )

    def follow_session_events(
        self, session_id: str, *, from_rev: int | None = None, limit: int = 100
    ) -> AsyncGenerator[v.EventView, None]:
        """Each event: the snapshot, then new ones until the session ends."""
        return self.items(
            V.SESSION_EVENTS,
            _adapter(V.SESSION_EVENTS),
            session_id=session_id,
            from_rev=from_rev,
            limit=limit,
            follow=True,
        )

    async def session_artifact(self, session_id: str, rev: int, offset: int = 0) -> a.ArtifactChunk:
        """A chunk of the whole event behind the preview at `rev` (see `session_event`)."""
        return await self.ask(
            V.SESSION_ARTIFACT, a.ArtifactChunk, session_id=session_id, rev=rev, offset=offset
        )

    async def session_event(self, session_id: str, rev: int) -> dict[str, Any]:
        """The event at `rev` whole: its stored payload, or — for an event committed as a
        preview — its artifact read back in chunks and checked against its digest."""
        from choir.artifact_read import whole_event

        return await whole_event(self.call, session_id, rev)

    async def session_cores(self, session_id: str) -> a.SessionCores:
        return await self.ask(V.SESSION_CORES, a.SessionCores, session_id=session_id)

    async def session_locks(self, session_id: str) -> v.LocksView:
        """The lock table the agent last reported."""
        return await self.ask(V.SESSION_LOCKS, v.LocksView, session_id=session_id)

    async def session_cancel(self, session_id: str, job_name: str) -> a.CancelRequested:
        return await self.ask(
            V.SESSION_CANCEL, a.CancelRequested, session_id=session_id, job_name=job_name
        )

    async def session_inject(self, session_id: str, job_name: str, text: str) -> a.InjectRequested:
        return await self.ask(
            V.SESSION_INJECT, a.InjectRequested, session_id=session_id, job_name=job_name, text=text
        )

    async def session_compact(self, session_id: str, lane: str | None = None) -> a.CompactRequested:
        return await self.ask(
            V.SESSION_COMPACT, a.CompactRequested, session_id=session_id, lane=lane
        )

    async def session_recover(
        self, session_id: str, *, job_name: str | None = None, choice: RecoverChoice | None = None
    ) -> a.SessionRecovery:
        """Calls a crash left with unknown outcomes; with `choice`, the decision on them."""
        return await self.ask(
            V.SESSION_RECOVER,
            a.SessionRecovery,
            session_id=session_id,
            job_name=job_name,
            choice=choice,
        )

    # approvals

    async def approval_list(
        self, *, include_resolved: bool = False, agent_id: str | None = None
    ) -> a.ApprovalList:
        """Pending approvals; with `include_resolved`, answered and timed-out ones too."""
        return await self.ask(
            V.APPROVAL_LIST, a.ApprovalList, all=include_resolved, agent_id=agent_id
        )

    async def approval_show(self, approval_id: str) -> v.ApprovalView:
        return await self.ask(V.APPROVAL_SHOW, v.ApprovalView, approval_id=approval_id)

    async def approval_approve(
        self, approval_id: str, *, by: str = "choirctl", restart: bool = False
    ) -> v.ApprovalView:
        chosen = {"restart": True} if restart else {}
        return await self.ask(
            V.APPROVAL_APPROVE, v.ApprovalView, approval_id=approval_id, by=by, **chosen
        )

    async def approval_reject(self, approval_id: str, *, by: str = "choirctl") -> v.ApprovalView:
        return await self.ask(V.APPROVAL_REJECT, v.ApprovalView, approval_id=approval_id, by=by)

    async def approval_extend(
        self, approval_id: str, amount: int, *, by: str = "choirctl"
    ) -> v.ApprovalView:
        return await self.ask(
            V.APPROVAL_EXTEND, v.ApprovalView, approval_id=approval_id, amount=amount, by=by
        )

    async def tool_register(self, agent_id: str, branch: str) -> v.ApprovalView:
        return await self.ask(V.TOOL_REGISTER, v.ApprovalView, agent_id=agent_id, branch=branch)

    # workspaces

    async def workspace_list(self) -> a.WorkspaceList:
        return await self.ask(V.WORKSPACE_LIST, a.WorkspaceList)

    async def workspace_reset(self, name: str) -> a.WorkspaceReset:
        return await self.ask(V.WORKSPACE_RESET, a.WorkspaceReset, name=name)

    # models and voices

    async def model_list(self) -> a.ModelList:
        return await self.ask(V.MODEL_LIST, a.ModelList)

    async def model_get(self, agent_id: str) -> a.AgentChoices:
        return await self.ask(V.MODEL_GET, a.AgentChoices, agent_id=agent_id)

    async def model_set(self, agent_id: str, llm: str) -> a.BindingSwitched:
        return await self.ask(V.MODEL_SET, a.BindingSwitched, agent_id=agent_id, llm=llm)

    async def voice_list(self) -> a.VoiceList:
        return await self.ask(V.VOICE_LIST, a.VoiceList)

    async def voice_get(self, agent_id: str) -> a.AgentChoices:
        return await self.ask(V.VOICE_GET, a.AgentChoices, agent_id=agent_id)

    async def voice_set(self, agent_id: str, voice_profile: str) -> a.BindingSwitched:
        return await self.ask(
            V.VOICE_SET, a.BindingSwitched, agent_id=agent_id, voice_profile=voice_profile
        )

    # logs and live updates

    def logs(self, source: str, *, follow: bool = True) -> AsyncGenerator[i.LogItem, None]:
        """Batches of lines of `choird`'s or an agent's log, the end of the snapshot, rotations."""
        return self.items(V.LOGS, _adapter(V.LOGS), source=source, follow=follow)

    def subscribe(self) -> AsyncGenerator[i.FeedItem, None]:
        """Live updates (`FeedItem`), starting with `subscribed`."""
        return self.items(V.SUBSCRIBE, _adapter(V.SUBSCRIBE))

    # the console DM

    async def chat_send(self, agent_id: str, text: str) -> a.ChatSent:
        """A message (or `/inject …`) to the agent bound to a console DM."""
        return await self.ask(V.CHAT_SEND, a.ChatSent, agent_id=agent_id, text=text)

    def chat_replies(
        self, agent_id: str, *, after_seq: int = 0
    ) -> AsyncGenerator[a.ChatReply, None]:
        """The agent's replies, core reports and errors, as they become durable."""
        return self.items(
            V.CHAT_REPLIES, _adapter(V.CHAT_REPLIES), agent_id=agent_id, after_seq=after_seq
        )

    # gateways

    async def gateway_status(self) -> a.GatewayStatus:
        """Every gateway: state, last update, DMs and their agents, queued and failed sends."""
        return await self.ask(V.GATEWAY_STATUS, a.GatewayStatus)

    # memory and knowledge

    async def memory_search(
        self,
        agent_id: str,
        query: str,
        *,
        store: str = "session",
        mode: str = "hybrid",
        session_id: str | None = None,
        limit: int = 10,
        graph: KnowledgeFilter | None = None,
    ) -> a.MemorySearch:
        """Search an agent's session memory or knowledge (kept by `graph`'s loc, type and
        tags); semantic and hybrid fall back to text when no embedder answers (`fallback`
        says why)."""
        return await self.ask(
            V.MEMORY_SEARCH,
            a.MemorySearch,
            agent_id=agent_id,
            query=query,
            store=store,
            mode=mode,
            session_id=session_id,
            limit=limit,
            **(graph or {}),
        )

    async def memory_show(self, item_id: str, *, agent_id: str | None = None) -> a.MemoryItem:
        """A session chunk (with its source events) or a knowledge item, by id."""
        return await self.ask(V.MEMORY_SHOW, a.MemoryItem, item_id=item_id, agent_id=agent_id)

    async def memory_stats(self, agent_id: str | None = None) -> a.MemoryStats:
        """One agent's memory counts (None: every agent's) and the embedding service's state."""
        return await self.ask(V.MEMORY_STATS, a.MemoryStats, agent_id=agent_id)

    async def usage(
        self,
        *,
        agent_id: str | None = None,
        model: str | None = None,
        since: str | None = None,
        by: str = "day",
        kind: str | None = None,
    ) -> a.UsageReport:
        """Billed calls (LLM, embedding, TTS; one `kind` of them) and their cost grouped `by`
        day, model, agent, job, agent_day or kind."""
        given = _present({"agent_id": agent_id, "model": model, "since": since, "kind": kind})
        return await self.ask(V.USAGE, a.UsageReport, by=by, **given)

    async def knowledge_list(
        self,
        agent_id: str,
        *,
        limit: int = 50,
        after: str | None = None,
        graph: KnowledgeFilter | None = None,
    ) -> a.KnowledgeList:
        """A page of items, oldest first; `graph` keeps those of a loc subtree, a type, tags."""
        return await self.ask(
            V.KNOWLEDGE_LIST,
            a.KnowledgeList,
            agent_id=agent_id,
            limit=limit,
            after=after,
            **(graph or {}),
        )

    async def knowledge_show(self, agent_id: str, ref: str) -> a.KnowledgeView:
        """The item whose name, alias or id is `ref`."""
        return await self.ask(V.KNOWLEDGE_SHOW, a.KnowledgeView, agent_id=agent_id, ref=ref)

    async def knowledge_put(
        self,
        agent_id: str,
        text: str,
        *,
        name: str | None = None,
        tags: list[str] | None = None,
        fields: KnowledgeFields | None = None,
    ) -> a.KnowledgeStored:
        """Write the item `name` names, or add it; embedded at once when possible. `fields`:
        its loc, type and data."""
        return await self.ask(
            V.KNOWLEDGE_PUT,
            a.KnowledgeStored,
            agent_id=agent_id,
            text=text,
            name=name,
            tags=tags,
            **(fields or {}),
        )

    async def knowledge_add(
        self,
        agent_id: str,
        text: str,
        *,
        name: str | None = None,
        tags: list[str] | None = None,
        fields: KnowledgeFields | None = None,
    ) -> a.KnowledgeStored:
        """Add an item (refused when an item answers to `name`)."""
        return await self.ask(
            V.KNOWLEDGE_ADD,
            a.KnowledgeStored,
            agent_id=agent_id,
            text=text,
            name=name,
            tags=tags,
            **(fields or {}),
        )

    async def knowledge_write(
        self,
        agent_id: str,
        ref: str,
        text: str | None,
        *,
        tags: list[str] | None = None,
        fields: KnowledgeFields | None = None,
    ) -> a.KnowledgeStored:
        """Replace the content of the item `ref` names (None text: kept); its previous version
        is kept."""
        return await self.ask(
            V.KNOWLEDGE_WRITE,
            a.KnowledgeStored,
            agent_id=agent_id,
            ref=ref,
            text=text,
            tags=tags,
            **(fields or {}),
        )

    async def knowledge_link(
        self, agent_id: str, ref: str, target: str, edge: str
    ) -> a.KnowledgeLinked:
        """Add an edge of type `edge` from item `ref` to item `target`."""
        return await self.ask(
            V.KNOWLEDGE_LINK,
            a.KnowledgeLinked,
            agent_id=agent_id,
            ref=ref,
            target=target,
            edge=edge,
        )

    async def knowledge_unlink(
        self, agent_id: str, ref: str, target: str, edge: str | None = None
    ) -> a.KnowledgeUnlinked:
        """Remove the edges (of type `edge`, or all) from item `ref` to item `target`."""
        return await self.ask(
            V.KNOWLEDGE_UNLINK,
            a.KnowledgeUnlinked,
            agent_id=agent_id,
            ref=ref,
            target=target,
            edge=edge,
        )

    async def knowledge_delete(self, agent_id: str, ref: str) -> a.KnowledgeDeleted:
        return await self.ask(V.KNOWLEDGE_DELETE, a.KnowledgeDeleted, agent_id=agent_id, ref=ref)

    async def knowledge_rename(self, agent_id: str, ref: str, name: str) -> a.KnowledgeView:
        return await self.ask(
            V.KNOWLEDGE_RENAME, a.KnowledgeView, agent_id=agent_id, ref=ref, name=name
        )

    async def knowledge_alias(self, agent_id: str, ref: str, alias: str) -> a.KnowledgeView:
        return await self.ask(
            V.KNOWLEDGE_ALIAS, a.KnowledgeView, agent_id=agent_id, ref=ref, alias=alias
        )

    async def knowledge_history(
        self, agent_id: str, ref: str, *, limit: int = 50
    ) -> a.KnowledgeHistory:
        """The item and its versions, newest first."""
        return await self.ask(
            V.KNOWLEDGE_HISTORY, a.KnowledgeHistory, agent_id=agent_id, ref=ref, limit=limit
        )

    async def memory_about(self, agent_id: str, user: str, *, limit: int = 100) -> a.MemoryAbout:
        """The items `agent_id`'s sessions with `user` (a DM name or gateway user id) wrote."""
        return await self.ask(
            V.MEMORY_ABOUT, a.MemoryAbout, agent_id=agent_id, user=user, limit=limit
        )

    async def memory_forget(self, agent_id: str, ref: str) -> a.MemoryForgotten:
        """Remove the item `ref` names from every memory store and index (recorded as the
        client's `by`, choirctl's default)."""
        return await self.ask(V.MEMORY_FORGET, a.MemoryForgotten, agent_id=agent_id, ref=ref)

    async def knowledge_source(self, agent_id: str, ref: str) -> a.KnowledgeSource:
        """Where the item's content came from, with the session events that wrote it."""
        return await self.ask(V.KNOWLEDGE_SOURCE, a.KnowledgeSource, agent_id=agent_id, ref=ref)

    async def knowledge_expand(
        self, agent_id: str, ref: str, offset: int | None = None, limit: int = 50
    ) -> a.KnowledgeExpansion:
        """One step down the summary tree from the item `ref` names (a leaf: a page of its
        session events from `offset`)."""
        return await self.ask(
            V.KNOWLEDGE_EXPAND,
            a.KnowledgeExpansion,
            agent_id=agent_id,
            ref=ref,
            offset=offset,
            limit=limit,
        )

    async def knowledge_restore(self, agent_id: str, ref: str, version: int) -> a.KnowledgeStored:
        """Write version `version`'s content as the item's newest version."""
        return await self.ask(
            V.KNOWLEDGE_RESTORE, a.KnowledgeStored, agent_id=agent_id, ref=ref, version=version
        )

    # config and secrets

    async def config_load(self) -> a.ConfigLoaded:
        """Stage $CHOIR_HOME; ConfigError listing every problem when it is invalid."""
        loaded = await self.ask(V.CONFIG_LOAD, a.ConfigLoaded)
        _config_checked(loaded.staged, loaded.header, loaded.errors)
        return loaded

    async def config_diff(self) -> a.ConfigChanges:
        return await self.ask(V.CONFIG_DIFF, a.ConfigChanges)

    async def config_apply(self) -> a.ConfigApplied:
        return await self.ask(V.CONFIG_APPLY, a.ConfigApplied)

    async def config_show(self) -> a.ConfigShown:
        return await self.ask(V.CONFIG_SHOW, a.ConfigShown)

    async def secret_list(self) -> a.SecretList:
        return await self.ask(V.SECRET_LIST, a.SecretList)

    async def secret_apply(self) -> a.SecretsApplied:
        """Reload secrets.json in choird; ConfigError when it cannot be used."""
        applied = await self.ask(V.SECRET_APPLY, a.SecretsApplied)
        _config_checked(applied.applied, applied.header, applied.errors)
        return applied

    # the recovery inbox

    async def inbox_list(self, *, agent_id: str | None = None) -> a.InboxList:
        """What waits for a human after a restart (not the DMs' message inbox)."""
        return await self.ask(V.INBOX_LIST, a.InboxList, agent_id=agent_id)

    async def inbox_resolve(
        self, item_id: str, choice: InboxChoice, *, by: str = "choirctl"
    ) -> a.InboxResolved:
        """Decide one item through the verb that owns it; ConflictError if decided already."""
        return await self.ask(
            V.INBOX_RESOLVE, a.InboxResolved, item_id=item_id, choice=choice, by=by
        )


def _config_checked(done: bool, header: str | None, errors: list[str] | None) -> None:
    """Nothing if `done`; else the config problems the answer reports, as a ConfigError."""
    if not done:
        raise ConfigError(list(errors or []), header=header)


def _items() -> Any:
    """`choir.protocol.operator.items`, loaded with the first stream."""
    from choir.protocol.operator import items

    return items


@cache
def _adapter(verb: OperatorVerb) -> TypeAdapter[Any]:
    """The validator of `verb`'s stream items, built on first use."""
    from pydantic import TypeAdapter

    from choir.protocol.operator.contract import OPERATOR_MODELS

    return TypeAdapter(OPERATOR_MODELS[verb].item)


class KnowledgeFilter(TypedDict, total=False):
    """Which knowledge items a listing or a search keeps (design 003)."""

    loc: str
    type: str
    tags: list[str]
    memory: str
    """Only items of this memory: system, knowledge, app or personal."""
    user: str
    """Only this user's personal items (a DM)."""


class KnowledgeFields(TypedDict, total=False):
    """The graph fields a knowledge write sets (design 003), and its kind (design 004)."""

    loc: str
    type: str
    data: dict[str, Any]
    memory: str
    """A new item's memory (add, put only): system, knowledge, app or personal."""
    user: str
    """A personal item's user, a DM (add, put only)."""
    kind: str
    """correction, preference, fact or task: its importance in relevance search."""


def _went_away(verb: OperatorVerb | str, error: TransportError) -> str:
    """What a caller is told when choird's connection drops before the answer: the call may or
    may not have taken effect, so the next step is to look."""
    name = verb.value if isinstance(verb, OperatorVerb) else verb
    return (
        f"choird stopped answering during {name} ({error}): whether it took effect is unknown; "
        "start choird again with `choir up`, then check with `choirctl status`"
    )


def _present(payload: dict[str, Any]) -> Payload:
    return {key: value for key, value in payload.items() if value is not None}
