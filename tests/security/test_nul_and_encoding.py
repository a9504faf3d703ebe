"""NUL bytes, lone surrogates and invalid UTF-8 from every source (issue 11, hole 4).

Postgres refuses U+0000 in jsonb and text: one NUL in a model reply, exec output, a tool
argument or a chat message made every heartbeat fail until the session was declared crashed.
Here one session of the real `choir-agent` (process runtime, a scripted model) meets each of
them, and each must come through commit -> heartbeat -> Postgres -> `session events` -> a
resume after SIGKILL exactly as the agent committed and hashed it, the chain verifying at every
step. Where each one is normalised (docs/ARCHITECTURE.md): NUL is kept everywhere; invalid
UTF-8 becomes U+FFFD where bytes become text (exec output, file contents, the model's HTTP
body); a lone surrogate becomes U+FFFD where the model's JSON is decoded (and, as a last resort,
before an event is hashed).
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from choir.client import ChoirClient
from choir.daemon.agents.ingest import committed_of
from choir.daemon.app import ChoirDaemon
from choir.home import ChoirHome
from choir.protocol import GENESIS_HASH, RequestApprovalRequest, Snapshot
from choir.protocol.log.committed import chain_break
from choir.scripted import (
    RawStep,
    ReplyStep,
    Script,
    ScriptedCall,
    ScriptedModelServer,
    ToolCallsStep,
)
from choir.store.events import EventRecord
from choir.store.postgres.target import ConnectParams
from choir.store.snapshots import latest_snapshot
from tests.harness.chat import reply_to
from tests.harness.daemons import (
    agent_control_plane,
    poll_until,
    pool_of,
    running_daemon,
    stored_events,
)
from tests.harness.homes import read_config, scripted_home, write_config
from tests.lifecycle.support import choirctl

pytestmark = pytest.mark.slow

REPLACEMENT = "\ufffd"

# The model's final answer, written by hand: JSON escapes for NUL and a lone surrogate, and a
# raw 0xFF byte in the body (the scripted server sends `\udcff` as that byte).
FINAL_REPLY_BODY = (
    '{"id": "chatcmpl-raw", "object": "chat.completion", "created": 0, "model": "e2e",'
    ' "choices": [{"index": 0, "finish_reason": "stop", "logprobs": null, "message":'
    ' {"role": "assistant", "refusal": null,'
    ' "content": "done: a\\u0000b \\ud800 \udcff end"}}],'
    ' "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}'
)
FINAL_REPLY = f"done: a\x00b {REPLACEMENT} {REPLACEMENT} end"

SCRIPT = Script(
    description="every source of awkward text in one turn, then one more after a resume",
    steps=[
        ToolCallsStep(
            match="please poke",
            calls=[
                ScriptedCall(
                    name="choir.exec", arguments={"command": "printf 'out a\\0b \\377\\376 end'"}
                ),
                ScriptedCall(
                    name="choir.fs.read",
                    arguments={"path": "mixed.txt", "mode": "range", "start_line": 101},
                ),
                ScriptedCall(
                    name="choir.fs.write",
                    arguments={"path": "nul.txt", "op": "overwrite", "content": "x\x00y\n"},
                ),
                ScriptedCall(
                    name="choir.exec", raw_arguments=r'{"command": "printf \"lone \ud800\""}'
                ),
            ],
        ),
        RawStep(after="tool", body=FINAL_REPLY_BODY),
        ReplyStep(match="again", text="still here\x00after the resume"),
        ReplyStep(match="poke raw", text="raw bytes taken"),
    ],
)

MIXED_LINE = b"n\x00l\xffz\n"
"""Line 101 of mixed.txt: past the 8 KiB a binary sniff looks at, so it is read as text."""


@pytest.fixture
def script() -> Script:
    return SCRIPT


@pytest.fixture
def home(root: Path, pg_params: ConnectParams, model: ScriptedModelServer) -> ChoirHome:
    """A home whose model is the scripted one and whose workspace holds mixed.txt."""
    home = scripted_home(root, pg_params, model.url)
    (root / "ws-other").mkdir()
    workspace = home.workspaces / "default"
    workspace.mkdir(parents=True, exist_ok=True)
    (workspace / "mixed.txt").write_bytes((b"x" * 89 + b"\n") * 100 + MIXED_LINE)
    return home


@pytest.fixture(params=[None, 1], ids=["replay", "snapshot-every-event"])
def cadence(request: pytest.FixtureRequest, home: ChoirHome) -> int | None:
    """A resume replays every event, or starts from a snapshot (one per event) that holds the
    same awkward text."""
    if request.param is not None:
        data = read_config(home)
        data["snapshot_every_events"] = request.param
        write_config(home, data)
    return request.param  # type: ignore[no-any-return]


@pytest.fixture
async def served(home: ChoirHome) -> AsyncIterator[tuple[ChoirDaemon, ChoirClient]]:
    async with running_daemon(home) as daemon, await ChoirClient.connect(home) as client:
        yield daemon, client


def verified(records: list[EventRecord]) -> list[EventRecord]:
    """`records` after checking they form the session's chain from genesis, each hash
    recomputed from the payload as read back (so a single changed character fails)."""
    events = [committed_of(record) for record in records]
    problem = chain_break(events, base_rev=0, hash_prev=GENESIS_HASH, check_hashes=True)
    assert problem is None, problem
    return records


def _strings(value: object) -> list[str]:
    """Every string (keys too) in a JSON value."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [text for key, item in value.items() for text in (key, *_strings(item))]
    if isinstance(value, list):
        return [text for item in value for text in _strings(item)]
    return []


def texts(records: list[EventRecord]) -> str:
    """Every string in the payloads, as read back, one per line."""
    return "\n".join(text for record in records for text in _strings(record.payload))


async def test_awkward_text_from_every_source_survives_storage_and_a_resume(
    cadence: int | None, served: tuple[ChoirDaemon, ChoirClient]
) -> None:
    daemon, client = served
    home = daemon.home
    started = await client.agent_start("agent-1", {"dm": "console"})
    session_id = started.session_id

    # a NUL in a console chat message; the model answers with NUL, a lone surrogate, 0xFF
    assert (await reply_to(client, "please poke \x00 it"))["text"] == FINAL_REPLY
    records = verified(await stored_events(daemon, session_id))
    stored = texts(records)
    assert "please poke \x00 it" in stored  # the chat message
    assert f"out a\x00b {REPLACEMENT}{REPLACEMENT} end" in stored  # exec output
    assert f"n\x00l{REPLACEMENT}z\n" in stored  # a file read as text
    assert "x\x00y\n" in stored  # a tool argument
    assert f"lone {REPLACEMENT}" in stored  # a lone surrogate in the model's arguments
    assert FINAL_REPLY in stored  # the model's reply
    assert (home.workspaces / "default" / "nul.txt").read_bytes() == b"x\x00y\n"

    shown = await choirctl(home, "session", "events", session_id, "--json", "-n", "1000")
    assert shown.returncode == 0, shown.stderr
    listed = json.loads(shown.stdout)["events"]
    assert [(e["rev"], e["hash"], e["payload"]) for e in listed] == [
        (r.rev, r.hash, r.payload) for r in records
    ]
    human = await choirctl(home, "session", "events", session_id)
    assert human.returncode == 0, human.stderr

    # a chat message from a terminal that is not UTF-8: argv holds the byte 0xFF
    raw = await choirctl(home, "chat", "agent-1", os.fsdecode(b"poke raw \xff"))
    assert raw.returncode == 0, raw.stderr
    assert "raw bytes taken" in raw.stdout
    records = verified(await stored_events(daemon, session_id))
    assert f"poke raw {REPLACEMENT}" in texts(records)

    if cadence == 1:
        async with pool_of(daemon).acquire() as conn:
            latest = await latest_snapshot(conn, session_id, records[-1].rev)
        assert latest is not None
        snapshot = Snapshot.model_validate(latest.snapshot)
        assert snapshot.content_problem() is None  # its digest, recomputed from what came back
        assert any(FINAL_REPLY in text for text in _strings(latest.snapshot))

    os.kill(started.pid, signal.SIGKILL)
    await poll_until(lambda: _crashed(daemon, session_id), within=15)
    resumed = await client.agent_start("agent-1", {"dm": "console"})
    assert (resumed.session_id, resumed.resumed) == (session_id, True)
    assert (await reply_to(client, "again"))["text"] == "still here\x00after the resume"
    after = verified(await stored_events(daemon, session_id))
    assert [(r.rev, r.hash, r.payload) for r in after[: len(records)]] == [
        (r.rev, r.hash, r.payload) for r in records
    ]
    await client.agent_stop("agent-1")


async def _crashed(daemon: ChoirDaemon, session_id: str) -> bool:
    assert daemon.services is not None
    return str((await daemon.services.sessions.get(session_id)).status) != "active"


async def test_an_approval_payload_with_nul_is_stored_and_shown(
    served: tuple[ChoirDaemon, ChoirClient],
) -> None:
    """An agent's proposal carries what the model wrote: NUL included."""
    daemon, client = served
    assert daemon.services is not None
    started = await daemon.services.sessions.start("agent-1", {})
    plane = await agent_control_plane(daemon, "uds", started.session_id, started.lease_token)
    try:
        proposal = {"patch": {"note": "a\x00b"}, "why": "c\x00d"}
        # a budget question is stored as sent (a tool's manifest must load, a config change's
        # patch validate, first)
        request = RequestApprovalRequest(request_type="budget_extension", payload=proposal)
        answer = await plane.request_approval(request)
        shown = await client.approval_show(answer.approval_id)
        assert shown.payload == proposal
        [listed] = (await client.approval_list()).approvals
        assert listed.payload == proposal
        await client.approval_reject(answer.approval_id, by="ops\x00")
        assert (await client.approval_show(answer.approval_id)).resolved_by == "ops\x00"
    finally:
        await plane.close()
