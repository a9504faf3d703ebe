"""The console's one link to choird: a worker that keeps the operator socket and its feed alive.

All I/O of the console happens here or in view workers calling `bridge.ask` / `bridge.items`
(answers and stream items parsed as their `choir.protocol.operator` models) or the generic
`bridge.call` / `bridge.stream` — never in a message handler — so the UI thread never waits on
choird. The feed worker:

1. connects (`ChoirClient`) — no socket: `not_running`; socket not ours: `denied`;
2. subscribes, then re-reads the listings (`status`, `agent.list`, `approval.list`, lanes and
   locks of running sessions) so nothing that happened while away is missed;
3. parses each feed item (the `FeedItem` union tagged by `kind`) and posts it, matched on its
   class, as a `tui.messages` message to the app;
4. when the stream breaks (choird stopped, or we fell behind) it says `disconnected` and starts
   again after a backoff that grows to `MAX_BACKOFF_S` and resets once connected.

choird's `status` is re-read at most every `STATUS_REFRESH_S` (Postgres health, gateways); the
rest is pushed. Uptimes are counted up locally from `started_at`.

Everything choird answers may hold an agent's words (replies, tool output, core reports, log
lines, a refusal's reason), and Textual writes a widget's text to the terminal as it is: so
every answer, stream item and error message is made `visible` here, on its way in (before it is
parsed: each is walked once and validated once), and no control character an agent wrote can
drive the operator's terminal (`choir.ctl.render.visible`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
from collections.abc import AsyncGenerator, Iterator
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeVar

import orjson

from choir.client import ChoirClient
from choir.ctl.render.visible import visible, visible_data
from choir.errors import ChoirError, UnavailableError
from choir.home import ChoirHome
from choir.lazy import LazyModule
from choir.protocol.operator.verbs import OperatorVerb
from tui.messages import (
    AgentsUpdated,
    ApprovalChanged,
    ConfigChanged,
    ConnectionChanged,
    ConnectionState,
    LaneReported,
    LocksReported,
    Resynced,
    SecretsChanged,
    SessionChanged,
    StatusUpdated,
)

if TYPE_CHECKING:
    from pydantic import TypeAdapter
    from textual.app import App
    from textual.message import Message
    from textual.worker import Worker

    from choir.protocol.base import WireModel
    from choir.protocol.operator import answers as a
    from choir.protocol.operator import items as i
    from choir.protocol.operator import views as v
else:  # the models (and pydantic) load with the first answer: the console paints first
    a = LazyModule("choir.protocol.operator.answers")
    i = LazyModule("choir.protocol.operator.items")
    v = LazyModule("choir.protocol.operator.views")

Payload = dict[str, Any]
A = TypeVar("A", bound="WireModel")

FIRST_BACKOFF_S: Final = 0.5
MAX_BACKOFF_S: Final = 5.0
STATUS_REFRESH_S: Final = 5.0
"""How often choird's `status` (a Postgres probe) is read while connected."""


def access_problem(socket: Path) -> str | None:
    """Why this user may not use choird's socket, or None (also when there is no socket)."""
    fix = "run `choir tui` as the user running choird"
    try:
        socket.stat()
    except FileNotFoundError:
        return None
    except PermissionError:
        return f"permission denied reaching {socket}: {fix}"
    if not os.access(socket, os.R_OK | os.W_OK):
        return f"permission denied on {socket}: {fix}"
    return None


class Disconnected(UnavailableError):
    """An action was asked for while the console is not connected to choird."""


class ChoirBridge:
    """Owns the `ChoirClient`; `start()` runs the feed worker on the app."""

    def __init__(self, app: App[Any], home: ChoirHome) -> None:
        self.app = app
        self.home = home
        self.feed_worker: Worker[None] | None = None
        self.status_worker: Worker[None] | None = None
        self.client: ChoirClient | None = None
        """The live connection, None while disconnected."""
        self.state: ConnectionState = "connecting"
        self._connected = asyncio.Event()

    def start(self) -> None:
        """Run the feed worker (exclusive: a second start replaces the first)."""
        feed: Worker[None] = self.app.run_worker(
            self._run, name="choird feed", group="bridge", exclusive=True
        )
        self.feed_worker = feed  # given the function, not a coroutine: none is left un-awaited

    @property
    def connected(self) -> bool:
        """Whether choird answers now (a read started before is read again on resync)."""
        return self.client is not None

    async def wait_connected(self) -> ChoirClient:
        """The client, once connected (waits through reconnects)."""
        while self.client is None:
            await self._connected.wait()
        return self.client

    async def call(self, verb: str, **payload: Any) -> Payload:
        """Any operator verb; `Disconnected` while not connected, ChoirError when refused."""
        client = self.client
        if client is None:
            raise Disconnected("not connected to choird (retrying): try again in a moment")
        with shown_error():
            return shown(await client.call(verb, **payload))

    async def call_long(self, verb: str, **payload: Any) -> Payload:
        """A verb that may outlast the feed connection's call timeout (a graceful stop waits
        for the agent's session summary, up to config's timeouts): its own connection, no
        call timeout. ChoirError when refused or when choird is away."""
        if self.client is None:
            raise Disconnected("not connected to choird (retrying): try again in a moment")
        with shown_error():
            async with await ChoirClient.connect(self.home, call_timeout=None) as client:
                return shown(await client.call(verb, **payload))

    async def stream(self, verb: str, **payload: Any) -> AsyncGenerator[Payload, None]:
        """A streaming verb's items (`session.events` follow, `logs`, `chat.replies`).

        Raises `UnavailableError` when choird goes away; a view's worker usually catches it,
        awaits `wait_connected()` and opens the stream again from where it was.
        """
        client = self.client
        if client is None:
            raise Disconnected("not connected to choird (retrying)")
        with shown_error():
            async with contextlib.aclosing(client.stream(verb, **payload)) as items:
                async for item in items:
                    yield shown(item)

    async def ask(self, verb: OperatorVerb, answer: type[A], **payload: Any) -> A:
        """`verb`'s answer parsed as `answer` (its model in `OPERATOR_MODELS`), strings made
        `visible` before parsing: one pass of each."""
        return answer.model_validate(await self.call(verb, **payload))

    async def ask_long(self, verb: OperatorVerb, answer: type[A], **payload: Any) -> A:
        """`ask` on its own connection without a call timeout (see `call_long`)."""
        return answer.model_validate(await self.call_long(verb, **payload))

    async def items(self, verb: OperatorVerb, **payload: Any) -> AsyncGenerator[Any, None]:
        """A streaming verb's items parsed as its item type in `OPERATOR_MODELS` (the tagged
        union of `choir.protocol.operator.items`, an `EventView`, a `ChatReply`): each item is
        validated once, after it was made `visible`."""
        if self.client is None:  # before the models load: the console paints first
            raise Disconnected("not connected to choird (retrying)")
        parse = item_adapter(verb).validate_python
        async with contextlib.aclosing(self.stream(verb, **payload)) as items:
            async for item in items:
                yield parse(item)

    # the feed worker

    async def _run(self) -> None:
        backoff = FIRST_BACKOFF_S
        while True:
            client = await self._connect(backoff)
            if client is None:
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, MAX_BACKOFF_S)
                continue
            backoff = FIRST_BACKOFF_S
            reason = await self._serve(client)
            self._set_client(None)
            with contextlib.suppress(Exception):
                await client.close()
            self._post_state("disconnected", f"choird went away ({reason}) — retrying", backoff)
            await asyncio.sleep(backoff)

    async def _connect(self, backoff: float) -> ChoirClient | None:
        denied = access_problem(self.home.operator_socket)
        if denied is not None:
            self._post_state("denied", denied, backoff)
            return None
        try:
            return await ChoirClient.connect(self.home, call_timeout=30.0)
        except ChoirError as error:
            if self.state == "disconnected":
                self._post_state("disconnected", f"{error.message} — retrying", backoff)
            else:
                detail = f"choird is not running at {self.home.root}"
                self._post_state("not_running", detail, backoff)
        return None

    async def _serve(self, client: ChoirClient) -> str:
        """Run the feed until it breaks; the reason it broke."""
        try:
            parse = item_adapter(OperatorVerb.SUBSCRIBE).validate_python
            async with contextlib.aclosing(client.stream(OperatorVerb.SUBSCRIBE)) as items:
                async for raw in items:
                    item: i.FeedItem = parse(shown(raw))
                    if isinstance(item, i.SubscribedItem):
                        self._set_client(client)
                        await self._resync(client)
                        self._post_state("connected", "")
                        self._status_ticker(client)
                    else:
                        self._dispatch(item)
        except ChoirError as error:
            return visible(error.message)
        except (OSError, EOFError) as error:
            return visible(str(error) or type(error).__name__)
        finally:
            self.app.workers.cancel_group(self.app, "bridge-status")
        return "the feed ended"

    async def _resync(self, client: ChoirClient) -> None:
        """Read every listing again: what changed while we were away is in them."""
        self._post(StatusUpdated(await _ask(client, OperatorVerb.STATUS, a.StatusAnswer)))
        agents = (await _ask(client, OperatorVerb.AGENT_LIST, a.AgentList)).agents
        self._post(AgentsUpdated(agents))
        approvals = await _ask(client, OperatorVerb.APPROVAL_LIST, a.ApprovalList)
        for row in approvals.approvals:
            self._post(ApprovalChanged(row))
        for agent in agents:
            if agent.state == "running" and agent.session_id:
                await self.read_session(client, agent.agent_id, agent.session_id)
        self._post(Resynced())

    async def read_session(self, client: ChoirClient, agent_id: str, session_id: str) -> None:
        """Post a running agent's lanes and locks (after a resync, or a session starting)."""
        with contextlib.suppress(ChoirError):
            status = await _ask(client, OperatorVerb.AGENT_STATUS, a.AgentStatus, agent_id=agent_id)
            for lane in status.lanes:
                self._post(LaneReported(lane))
        with contextlib.suppress(ChoirError):
            verb = OperatorVerb.SESSION_LOCKS
            self._post(LocksReported(await _ask(client, verb, v.LocksView, session_id=session_id)))

    def _dispatch(self, item: i.FeedItem) -> None:
        match item:
            case i.LaneItem(data=lane):
                self._post(LaneReported(lane))
            case i.LocksItem(data=locks):
                self._post(LocksReported(locks))
            case i.ApprovalItem(data=approval):
                self._post(ApprovalChanged(approval))
            case i.SessionItem(data=session):
                self._post(SessionChanged(session))
                self.refresh_agents()
            case i.ConfigItem(data=config):
                self._post(ConfigChanged(config))
            case i.SecretsItem(data=secrets):
                self._post(SecretsChanged(secrets))
            case i.HealthItem():  # Postgres or the disk changed: the header shows it now
                self.refresh_status()
            case i.SubscribedItem():
                pass

    async def _reread_status(self) -> None:
        with contextlib.suppress(ChoirError):
            self._post(StatusUpdated(await self.ask(OperatorVerb.STATUS, a.StatusAnswer)))

    def refresh_status(self) -> Worker[None]:
        """Re-read `status` now (choird's health changed), not at the next 5 s tick."""
        return self.app.run_worker(self._reread_status, group="bridge-health", exclusive=True)

    async def _reread_agents(self) -> None:
        with contextlib.suppress(ChoirError):
            self._post(AgentsUpdated((await self.ask(OperatorVerb.AGENT_LIST, a.AgentList)).agents))

    def refresh_agents(self) -> Worker[None]:
        """Re-read `agent.list` soon (after a start/stop, or a lane of an unknown session).

        The worker gets the coroutine function, not a coroutine: a newer refresh cancels one
        that has not started yet, and an un-started coroutine would never be awaited."""
        return self.app.run_worker(self._reread_agents, group="bridge-agents", exclusive=True)

    def _status_ticker(self, client: ChoirClient) -> None:
        async def tick() -> None:
            while True:
                await asyncio.sleep(STATUS_REFRESH_S)
                with contextlib.suppress(ChoirError):
                    self._post(
                        StatusUpdated(await _ask(client, OperatorVerb.STATUS, a.StatusAnswer))
                    )

        ticker: Worker[None] = self.app.run_worker(tick, group="bridge-status", exclusive=True)
        self.status_worker = ticker

    # plumbing

    def _set_client(self, client: ChoirClient | None) -> None:
        self.client = client
        if client is None:
            self._connected.clear()
        else:
            self._connected.set()

    def _post_state(self, state: ConnectionState, detail: str, retry: float | None = None) -> None:
        self.state = state
        self._post(ConnectionChanged(state, detail, retry))

    def _post(self, message: Message) -> None:
        self.app.post_message(message)


_MAYBE_UNSAFE: Final = re.compile(rb"\\[rbfu]|\x7f|\xc2[\x80-\x9f]")
"""What a control `visible` changes looks like in orjson's output: a C0 control but newline and
tab is an escape (`\\r`, `\\b`, `\\f`, `\\u0007`), DEL and C1 controls are written as they are
(UTF-8). A literal backslash before r, b, f or u matches too: only the slow path then runs."""


def shown(answer: Payload) -> Payload:
    """choird's answer with every string `visible` (see the module's docstring).

    Almost nothing choird sends holds a control character: one scan of the encoded answer
    (orjson, in C) finds that out, and only an answer that may hold one is walked and copied."""
    try:
        clean = _MAYBE_UNSAFE.search(orjson.dumps(answer)) is None
    except (orjson.JSONEncodeError, TypeError):  # not JSON-shaped after all: walk it
        clean = False
    if clean:
        return answer
    result: Payload = visible_data(answer)
    return result


async def _ask(client: ChoirClient, verb: OperatorVerb, answer: type[A], **payload: Any) -> A:
    """`verb`'s answer on `client`, made `visible`, then parsed once as `answer`."""
    return answer.model_validate(shown(await client.call(verb, **payload)))


@cache
def item_adapter(verb: OperatorVerb) -> TypeAdapter[Any]:
    """The validator of `verb`'s stream items (`OPERATOR_MODELS`), built on first use."""
    from pydantic import TypeAdapter

    from choir.protocol.operator.contract import OPERATOR_MODELS

    return TypeAdapter(OPERATOR_MODELS[verb].item)


def parsed_answer(verb: str, answer: Payload) -> Any:
    """A catalogue verb's answer parsed as its model (when `verb` is one of choird's verbs
    and has one): what reaches the screen is what the API promises."""
    from choir.protocol.operator.contract import OPERATOR_MODELS

    try:
        models = OPERATOR_MODELS[OperatorVerb(verb)]
    except ValueError:
        return answer
    return answer if models.answer is None else models.answer.model_validate(answer)


def answer_notes(answer: Any) -> list[str]:
    """What an answer says beyond "done" that the operator must read, as choirctl prints it:
    a keyed start's sealing of items written before their memory was marked encrypted."""
    from choir.protocol.operator.answers import AgentStarted

    return list(answer.memory_sealed) if isinstance(answer, AgentStarted) else []


@contextlib.contextmanager
def shown_error() -> Iterator[None]:
    """A refusal's message made `visible` on its way to a notification."""
    try:
        yield
    except ChoirError as error:
        error.message = visible(error.message)
        error.args = (error.message,)
        raise
