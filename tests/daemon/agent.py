"""The agent's side of the conversation, for tests: a local hash chain and envelope calls."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson

from choir.daemon.agents.handler import AgentHandler
from choir.daemon.agents.services import AgentServices
from choir.daemon.sessions.state import StartedSession
from choir.protocol import (
    GENESIS_HASH,
    PROTOCOL_VERSION,
    CommittedEvent,
    Event,
    HeartbeatRequest,
    InitHelloRequest,
    ResponseEnvelope,
    RpcError,
    Snapshot,
    UserMsg,
    Verb,
    VersionInfo,
    WireModel,
    error_details,
)
from choir.transport import Peer, Request
from choir.transport import RpcError as Refused

T0 = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
IMAGE = VersionInfo(
    agent_id="agent-1",
    image_version="abc1234",
    global_repo_commit="1" * 40,
    agent_repo_commit="2" * 40,
    tool_manifest_hash="a" * 64,
    skill_manifest_hash="b" * 64,
)


class Chain:
    """The agent's commit log: events sealed onto a hash chain."""

    def __init__(self) -> None:
        self.events: list[CommittedEvent] = []

    @property
    def rev(self) -> int:
        return len(self.events)

    @property
    def head(self) -> str:
        return self.events[-1].hash if self.events else GENESIS_HASH

    def hash_at(self, rev: int) -> str:
        return self.events[rev - 1].hash if rev else GENESIS_HASH

    def commit(self, count: int, *, text: str = "hello") -> list[CommittedEvent]:
        for _ in range(count):
            rev = self.rev + 1
            lane = "edge" if rev % 3 else "core:refactor-auth"
            self._seal(lane, UserMsg(text=f"{text} {rev}"))
        return self.events[-count:] if count else []

    def commit_events(self, events: list[Event], lane: str = "edge") -> list[CommittedEvent]:
        """`events` committed on `lane`, in order."""
        for event in events:
            self._seal(lane, event)
        return self.events[-len(events) :] if events else []

    def _seal(self, lane: str, event: Event) -> None:
        rev = self.rev + 1
        self.events.append(
            CommittedEvent.seal(
                rev=rev,
                lane=lane,
                ts=T0 + timedelta(milliseconds=rev),
                hash_prev=self.head,
                event=event,
            )
        )

    def heartbeat(
        self, base_rev: int, *, snapshot: bool = False, config_version: int = 1
    ) -> HeartbeatRequest:
        """Revisions after `base_rev` up to the head."""
        return HeartbeatRequest(
            base_rev=base_rev,
            new_rev=self.rev,
            patches=self.events[base_rev:],
            config_version=config_version,
            hash_prev=self.hash_at(base_rev),
            hash_new=self.head,
            timestamp=T0,
            snapshot=Snapshot(rev=self.rev, hash=self.head).sealed() if snapshot else None,
        )


def hello(session: str, **changes: Any) -> InitHelloRequest:
    """agent-1's INIT_HELLO for `session` from a container built as `IMAGE`, with `changes`."""
    fields: dict[str, Any] = {
        "protocol_version": PROTOCOL_VERSION,
        "agent_id": "agent-1",
        "session_id": session,
        "image_version": IMAGE.image_version,
        "tool_manifest_hash": IMAGE.tool_manifest_hash,
        "skill_manifest_hash": IMAGE.skill_manifest_hash,
    }
    return InitHelloRequest(**{**fields, **changes})


class AgentClient:
    """Calls choird's agent handler exactly as the HTTP listener would (the lease alone names
    the session, the request's size is its body's), answering with the response envelope the
    wire would carry."""

    def __init__(self, services: AgentServices, started: StartedSession) -> None:
        self.services = services
        self.handler = AgentHandler(services.rpc, services.sessions)
        self.session_id = started.session_id
        self.token = started.lease_token

    async def call(self, verb: Verb, payload: WireModel | dict[str, Any]) -> ResponseEnvelope:
        body = payload if isinstance(payload, dict) else payload.model_dump(mode="json")
        request = Request(
            verb=verb.value,
            request_id=str(uuid.uuid4()),
            session_id=self.session_id,
            lease_token=self.token,
            payload=body,
            peer=Peer("http", "127.0.0.1:1"),
            size=len(orjson.dumps(body)),
        )
        try:
            answer = await self.handler.handle(request)
        except Refused as refused:
            details = error_details(refused.details)
            return ResponseEnvelope.failure(
                request.request_id, refused.code, refused.message, details
            )
        assert isinstance(answer, dict)
        return ResponseEnvelope(request_id=request.request_id, ok=True, payload=answer)

    async def ok(self, verb: Verb, payload: WireModel | dict[str, Any]) -> dict[str, Any]:
        response = await self.call(verb, payload)
        assert response.ok, response.error
        assert response.payload is not None
        return response.payload

    async def refused(self, verb: Verb, payload: WireModel | dict[str, Any]) -> RpcError:
        response = await self.call(verb, payload)
        assert not response.ok, response.payload
        assert response.error is not None
        return response.error
