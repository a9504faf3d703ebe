"""Large events at choird against real Postgres (issue 12 point 1): artifacts, paged handovers.

The agent side is the real commit log (its previews and artifacts) and the real agent RPC entry
point; the operator side the real operator socket. Nothing choird hands out — an INIT_HELLO
answer, a FETCH_EVENTS page, a `session.events` answer, an artifact chunk — exceeds a frame,
and everything that was accepted is read back whole.
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson
import pytest

from choir.agent.kernel.commitlog import CommitLog, LogEntry
from choir.artifact_read import event_range
from choir.daemon.agents.services import AgentServices
from choir.protocol import AgentReplied, ErrorCode, HeartbeatRequest, UserMsg, Verb
from choir.protocol.wire.artifacts import ARTIFACT_CHUNK_BYTES, decode_chunk, encode_chunk
from choir.transport import DEFAULT_MAX_FRAME

from .agent import T0, AgentClient, hello
from .operator_served import served_api, served_choird, served_home, served_pushes

__all__ = ["served_api", "served_choird", "served_home", "served_pushes"]

BIG = "".join(f"line {n:07d} of a long answer\n" for n in range(80_000))  # ~2.3 MB


@pytest.fixture
async def agent(services: AgentServices) -> AgentClient:
    return AgentClient(services, await services.sessions.start("agent-1", {}))


def beat(log: CommitLog, entries: list[LogEntry]) -> HeartbeatRequest:
    base = entries[0].rev - 1
    return HeartbeatRequest.model_validate(
        {
            "base_rev": base,
            "new_rev": entries[-1].rev,
            "patches": [e.wire() for e in entries],
            "config_version": 1,
            "hash_prev": entries[0].hash_prev,
            "hash_new": entries[-1].hash,
            "timestamp": T0,
        }
    )


async def upload(agent: AgentClient, content: bytes) -> dict[str, Any]:
    sha = hashlib.sha256(content).hexdigest()
    answer: dict[str, Any] = {}
    for offset in range(0, len(content), ARTIFACT_CHUNK_BYTES):
        chunk = content[offset : offset + ARTIFACT_CHUNK_BYTES]
        request = {"sha256": sha, "size": len(content), "offset": offset}
        answer = await agent.ok(Verb.PUT_ARTIFACT, {**request, "data": encode_chunk(chunk)})
    return answer


async def test_a_preview_is_accepted_only_once_its_artifact_is_stored_whole(agent, choird):
    log = CommitLog()
    log.commit("edge", UserMsg(text="long please", message_id="m-1"))
    entry = log.commit("edge", AgentReplied(text=BIG, in_reply_to="m-1"))
    assert entry.artifact is not None
    content = log.artifacts[entry.artifact["sha256"]]
    sha = entry.artifact["sha256"]

    early = await agent.refused(Verb.HEARTBEAT, beat(log, list(log)))
    first = {"sha256": sha, "size": len(content), "offset": 0}
    chunk = encode_chunk(content[:ARTIFACT_CHUNK_BYTES])
    once = await agent.ok(Verb.PUT_ARTIFACT, {**first, "data": chunk})
    again = await agent.ok(Verb.PUT_ARTIFACT, {**first, "data": chunk})  # a resend: no change
    skipped = await agent.ok(
        Verb.PUT_ARTIFACT, {**first, "offset": 2 * ARTIFACT_CHUNK_BYTES, "data": chunk}
    )
    done = await upload(agent, content)
    acked = await agent.ok(Verb.HEARTBEAT, beat(log, list(log)))

    assert early.code == ErrorCode.CONFLICT
    assert "PUT_ARTIFACT" in early.message
    assert once == again == skipped == {"stored": ARTIFACT_CHUNK_BYTES, "complete": False}
    assert done == {"stored": len(content), "complete": True}
    assert acked["ack_rev"] == 2
    whole = await choird.session_event(agent.session_id, 2)
    assert whole["text"] == BIG
    assert whole["in_reply_to"] == "m-1"
    listed = await choird.session_events(agent.session_id)
    assert [e.artifact for e in listed.events] == [None, entry.artifact]


async def test_an_artifact_that_does_not_match_its_digest_is_refused(agent):
    content = b'{"kind":"user_msg","text":"' + b"z" * 1000 + b'"}'
    lie = {"sha256": "0" * 64, "size": len(content), "offset": 0, "data": encode_chunk(content)}

    refused = await agent.refused(Verb.PUT_ARTIFACT, lie)
    retried = await agent.refused(Verb.PUT_ARTIFACT, lie)

    assert refused.code == ErrorCode.CONFLICT
    assert "do not match its digest" in refused.message
    assert "nothing was stored" in retried.message


async def test_an_artifact_is_read_back_only_by_its_own_session(agent, services):
    content = orjson.dumps({"kind": "user_msg", "text": "q" * 1000})
    await upload(agent, content)
    sha = hashlib.sha256(content).hexdigest()
    other = AgentClient(services, await services.sessions.start("agent-2", {}))

    mine = await agent.ok(Verb.FETCH_ARTIFACT, {"sha256": sha, "offset": 10})
    theirs = await other.refused(Verb.FETCH_ARTIFACT, {"sha256": sha})

    assert decode_chunk(mine["data"]) == content[10:]
    assert (mine["size"], mine["offset"]) == (len(content), 10)
    assert theirs.code == ErrorCode.NOT_FOUND


async def test_a_resume_of_many_large_events_is_handed_over_in_pages(agent, services, choird):
    log = CommitLog()
    for n in range(12):
        log.commit("edge", UserMsg(text=f"{n}:" + "m" * 100_000))  # each just under the bound
        log.commit("edge", AgentReplied(text=f"reply {n}"))
    for entry in log:
        assert entry.artifact is None
    for start in range(0, 24, 4):
        await agent.ok(Verb.HEARTBEAT, beat(log, log.since(start)[:4]))
    await services.sessions.mark_crashed(agent.session_id, "killed")
    resumed = AgentClient(services, await services.sessions.start("agent-1", {}))

    hello_answer = await resumed.ok(Verb.INIT_HELLO, hello(resumed.session_id))
    tail, sizes = list(hello_answer["tail_events"]), [len(orjson.dumps(hello_answer))]
    complete = hello_answer.get("tail_complete", True)
    while not complete:
        page = await resumed.ok(Verb.FETCH_EVENTS, {"after_rev": tail[-1]["rev"]})
        sizes.append(len(orjson.dumps(page)))
        tail.extend(page["events"])
        complete = page["complete"]

    assert hello_answer["tail_complete"] is False
    assert len(sizes) > 2
    assert max(sizes) < DEFAULT_MAX_FRAME
    assert [e["hash"] for e in tail] == [e.hash for e in log]
    window = await choird.session_events(resumed.session_id, limit=1000)
    assert len(orjson.dumps(window.model_dump(mode="json"))) < DEFAULT_MAX_FRAME
    assert window.events[-1].rev == 24
    assert len(window.events) < 24
    first = await choird.session_events(resumed.session_id, from_rev=1, limit=1000)
    assert first.events[0].rev == 1
    assert first.next_rev == len(first.events) + 1
    # the console pages history with event_range: every revision, no gap between answers
    paged = await event_range(choird.call, resumed.session_id, 3, 20)
    assert [e["rev"] for e in paged] == list(range(3, 23))
