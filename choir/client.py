"""The async client of choird's operator socket, shared by choirctl and the TUI.

One method per operator verb (see `choir.daemon.operator.api`), answers as the JSON objects
choird sends. Refusals arrive as the operator-facing errors of `choir.errors`, so a caller can
`except NotFoundError` and choirctl exits with the documented code: not found 4, conflict 5,
invalid arguments 2, invalid config 3, choird unreachable 6.

    async with await ChoirClient.connect(ChoirHome.resolve()) as choird:
        print((await choird.status())["config_version"])
        async for item in choird.logs("choird"):
            ...
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from choir.errors import ChoirError, ConfigError, UnavailableError, error_class
from choir.home import ChoirHome
from choir.transport import Client, RpcError, TransportError, connect

Payload = dict[str, Any]
Progress = Callable[[Payload], None]
"""Receives the progress items of a long verb (`agent_update`…) as they arrive."""


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
                f"choird is not running (no socket at {socket}): start it with `choird`"
            )
        try:
            client = await connect(socket, call_timeout=call_timeout)
        except TransportError:
            raise UnavailableError(
                f"choird is not running (nothing listens on {socket}): start it with `choird`"
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

    async def call(self, verb: str, **payload: Any) -> Payload:
        """Any operator verb; arguments that are None are left out."""
        try:
            return await self._client.call(verb, _present(payload))
        except RpcError as error:
            raise operator_error(error) from None

    async def stream(self, verb: str, **payload: Any) -> AsyncGenerator[Payload, None]:
        """A streaming verb's items; close the generator to stop choird's side."""
        items = self._client.stream(verb, _present(payload))
        async with contextlib.aclosing(items):
            try:
                async for item in items:
                    yield item
            except RpcError as error:
                raise operator_error(error) from None

    # choird and agents

    async def status(self) -> Payload:
        return await self.call("status")

    async def agent_list(self) -> Payload:
        return await self.call("agent.list")

    async def agent_status(self, agent_id: str) -> Payload:
        return await self.call("agent.status", agent_id=agent_id)

    async def agent_start(
        self,
        agent_id: str,
        overrides: Mapping[str, str | None] | None = None,
        *,
        new_session: bool = False,
        resume: str | None = None,
    ) -> Payload:
        """Start the agent (§17.1); `overrides` maps a role (`dm`, `llm`…) to a name."""
        chosen = {role: name for role, name in (overrides or {}).items() if name is not None}
        return await self.call(
            "agent.start",
            agent_id=agent_id,
            overrides=chosen,
            new_session=new_session,
            resume=resume,
        )

    async def agent_stop(self, agent_id: str) -> Payload:
        """Graceful stop (§17.2); answers when the agent's process has exited."""
        return await self.call("agent.stop", agent_id=agent_id)

    async def agent_restart(self, agent_id: str) -> Payload:
        """Stop, then start the same session with the same bindings; `{…start, stopped}`."""
        return await self.call("agent.restart", agent_id=agent_id)

    async def agent_build(self, agent_id: str, progress: Progress | None = None) -> Payload:
        """Build the agent's image if anything changed (§17.3): `{tag, image_id, built, version}`.

        `progress` receives each of the ten steps and the docker build's output lines."""
        return await self._reported(self.stream("agent.build", agent_id=agent_id), progress)

    async def agent_update(self, agent_id: str, progress: Progress | None = None) -> Payload:
        """Build if needed, then redeploy resuming the session (§17.4): `{outcome, reason…}`.

        `progress` receives each step (a build's output lines too) as it happens."""
        return await self._reported(self.stream("agent.update", agent_id=agent_id), progress)

    async def agent_update_all(self, progress: Progress | None = None) -> Payload:
        """`agent_update` for every agent in turn (§17.5): `{agents: [{outcome…}], failed}`."""
        return await self._reported(self.stream("agent.update_all"), progress)

    async def shutdown(self) -> Payload:
        """Stop choird (it stops its agents gracefully first): `{pid, agents_running}`."""
        return await self.call("shutdown")

    @staticmethod
    async def _reported(items: AsyncGenerator[Payload, None], progress: Progress | None) -> Payload:
        """The result of a reporting stream, handing its progress items to `progress`."""
        async with contextlib.aclosing(items):
            async for item in items:
                if item.get("kind") == "result":
                    result: Payload = item["result"]
                    return result
                if progress is not None:
                    progress(item)
        raise UnavailableError("choird closed the stream before answering: see choirctl logs")

    # sessions

    async def session_list(self, agent_id: str | None = None, *, limit: int = 50) -> Payload:
        return await self.call("session.list", agent_id=agent_id, limit=limit)

    async def session_events(
        self, session_id: str, *, from_rev: int | None = None, limit: int = 100
    ) -> Payload:
        """`{session_id, events, next_rev}`: `limit` events from `from_rev`, else the last."""
        return await self.call(
            "session.events", session_id=session_id, from_rev=from_rev, limit=limit
        )

    def follow_session_events(
        self, session_id: str, *, from_rev: int | None = None, limit: int = 100
    ) -> AsyncGenerator[Payload, None]:
        """Each event: the snapshot, then new ones until the session ends."""
        return self.stream(
            "session.events", session_id=session_id, from_rev=from_rev, limit=limit, follow=True
        )

    async def session_artifact(self, session_id: str, rev: int, offset: int = 0) -> Payload:
        """A chunk of the whole event behind the preview at `rev` (see `session_event`)."""
        return await self.call("session.artifact", session_id=session_id, rev=rev, offset=offset)

    async def session_event(self, session_id: str, rev: int) -> dict[str, Any]:
        """The event at `rev` whole: its stored payload, or — for an event committed as a
        preview — its artifact read back in chunks and checked against its digest."""
        from choir.artifact_read import whole_event

        return await whole_event(self.call, session_id, rev)

    async def session_cores(self, session_id: str) -> Payload:
        return await self.call("session.cores", session_id=session_id)

    async def session_locks(self, session_id: str) -> Payload:
        """`{session_id, reported_at, locks}`: the lock table the agent last reported."""
        return await self.call("session.locks", session_id=session_id)

    async def session_cancel(self, session_id: str, job_name: str) -> Payload:
        return await self.call("session.cancel", session_id=session_id, job_name=job_name)

    async def session_compact(self, session_id: str, lane: str | None = None) -> Payload:
        return await self.call("session.compact", session_id=session_id, lane=lane)

    async def session_recover(
        self, session_id: str, *, job_name: str | None = None, choice: str | None = None
    ) -> Payload:
        """Calls a crash left with unknown outcomes; with `choice`, the decision on them."""
        return await self.call(
            "session.recover", session_id=session_id, job_name=job_name, choice=choice
        )

    # approvals

    async def approval_list(
        self, *, include_resolved: bool = False, agent_id: str | None = None
    ) -> Payload:
        """Pending approvals; with `include_resolved`, answered and timed-out ones too."""
        return await self.call("approval.list", all=include_resolved, agent_id=agent_id)

    async def approval_show(self, approval_id: str) -> Payload:
        return await self.call("approval.show", approval_id=approval_id)

    async def approval_approve(self, approval_id: str, *, by: str = "choirctl") -> Payload:
        return await self.call("approval.approve", approval_id=approval_id, by=by)

    async def approval_reject(self, approval_id: str, *, by: str = "choirctl") -> Payload:
        return await self.call("approval.reject", approval_id=approval_id, by=by)

    # workspaces

    async def workspace_list(self) -> Payload:
        return await self.call("workspace.list")

    async def workspace_reset(self, name: str) -> Payload:
        return await self.call("workspace.reset", name=name)

    # models and voices

    async def model_list(self) -> Payload:
        return await self.call("model.list")

    async def model_get(self, agent_id: str) -> Payload:
        return await self.call("model.get", agent_id=agent_id)

    async def model_set(self, agent_id: str, llm: str) -> Payload:
        return await self.call("model.set", agent_id=agent_id, llm=llm)

    async def voice_list(self) -> Payload:
        return await self.call("voice.list")

    async def voice_get(self, agent_id: str) -> Payload:
        return await self.call("voice.get", agent_id=agent_id)

    async def voice_set(self, agent_id: str, voice_profile: str) -> Payload:
        return await self.call("voice.set", agent_id=agent_id, voice_profile=voice_profile)

    # logs and live updates

    def logs(self, source: str, *, follow: bool = True) -> AsyncGenerator[Payload, None]:
        """`{kind: lines|snapshot_end|rotated}` items of `choird`'s or an agent's log."""
        return self.stream("logs", source=source, follow=follow)

    def subscribe(self) -> AsyncGenerator[Payload, None]:
        """Live `{kind, data}` updates, starting with `subscribed`."""
        return self.stream("subscribe")

    # the console DM

    async def chat_send(self, agent_id: str, text: str) -> Payload:
        """A message (or `/inject …`) to the agent bound to a console DM."""
        return await self.call("chat.send", agent_id=agent_id, text=text)

    def chat_replies(self, agent_id: str, *, after_seq: int = 0) -> AsyncGenerator[Payload, None]:
        """The agent's replies, core reports and errors, as they become durable."""
        return self.stream("chat.replies", agent_id=agent_id, after_seq=after_seq)

    # config and secrets

    async def config_load(self) -> Payload:
        """Stage $CHOIR_HOME; ConfigError listing every problem when it is invalid."""
        return _config_checked(await self.call("config.load"), "staged")

    async def config_diff(self) -> Payload:
        return await self.call("config.diff")

    async def config_apply(self) -> Payload:
        return await self.call("config.apply")

    async def config_show(self) -> Payload:
        return await self.call("config.show")

    async def secret_list(self) -> Payload:
        return await self.call("secret.list")

    async def secret_apply(self) -> Payload:
        """Reload secrets.json in choird; ConfigError when it cannot be used."""
        return _config_checked(await self.call("secret.apply"), "applied")


def _config_checked(answer: Payload, done: str) -> Payload:
    """`answer`, unless it reports config problems instead of `done`: then ConfigError."""
    if answer.get(done):
        return answer
    raise ConfigError(list(answer.get("errors", [])), header=answer.get("header"))


def _present(payload: dict[str, Any]) -> Payload:
    return {key: value for key, value in payload.items() if value is not None}
