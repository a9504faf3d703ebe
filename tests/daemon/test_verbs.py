"""The agent verbs through the RPC entry point, as a transport calls them."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import orjson
import pytest

from choir.daemon.agents.host_tools import HostToolCall
from choir.daemon.agents.services import AgentServices
from choir.errors import ConflictError, NotFoundError
from choir.protocol import (
    PROTOCOL_VERSION,
    ErrorCode,
    ExecuteHostToolRequest,
    GetSecretsResponse,
    ReportStatusRequest,
    RequestApprovalRequest,
    TerminateSelfRequest,
    ToolResult,
    Verb,
)
from choir.store.leases import all_leases
from choir.store.sessions import SessionStatus
from tests.harness.proposals import TOOL_PROPOSAL

from .agent import IMAGE, AgentClient, Chain, hello
from .conftest import read_config, write_config


async def start(services: AgentServices, agent_id: str = "agent-1", **kwargs) -> AgentClient:
    return AgentClient(services, await services.sessions.start(agent_id, {}, **kwargs))


async def test_hello_of_a_new_session_is_fresh(services):
    agent = await start(services, image=IMAGE)

    reply = await agent.ok(Verb.INIT_HELLO, hello(agent.session_id))

    assert reply == {
        "status": "fresh",
        "lease_token": agent.token,
        "resource_bindings": {
            "workspace": "default",
            "llm": "demo",
            "voice_profile": None,
            "git_identity": "agent-1",
            "notion": None,
            "email": None,
            "dm": "console",
        },
        "snapshot": None,
        "tail_events": [],
        "config_version": 1,
        # nothing spent yet: the agent's spend caps start from 0 today (UTC)
        "spend": {"day": reply["spend"]["day"], "day_usd": 0.0, "month_usd": 0.0},
    }
    assert reply["spend"]["day"] == datetime.now(UTC).strftime("%Y-%m-%d")


@pytest.mark.parametrize(
    ("changes", "code", "message"),
    [
        (
            {"protocol_version": PROTOCOL_VERSION + 1},
            ErrorCode.PROTOCOL_MISMATCH,
            f"protocol_version {PROTOCOL_VERSION + 1} is not spoken by this choird",
        ),
        ({"agent_id": "agent-2"}, ErrorCode.UNAUTHORIZED, "INIT_HELLO names agent agent-2"),
        (
            {"session_id": "s-other"},
            ErrorCode.UNAUTHORIZED,
            "INIT_HELLO names agent agent-1 session s-other",
        ),
        (
            {"tool_manifest_hash": "f" * 64},
            ErrorCode.CONFLICT,
            f"image drift in agent-1: tool_manifest_hash {'f' * 64} (choird built {'a' * 64})",
        ),
        (
            {"image_version": "def5678", "skill_manifest_hash": "e" * 64},
            ErrorCode.CONFLICT,
            "image drift in agent-1: image_version def5678 (choird built abc1234); "
            "skill_manifest_hash",
        ),
    ],
)
async def test_hello_refuses_another_agent_protocol_or_image(services, changes, code, message):
    agent = await start(services, image=IMAGE)

    error = await agent.refused(Verb.INIT_HELLO, hello(agent.session_id, **changes))

    assert error.code == code
    assert error.message.startswith(message)


async def test_without_a_recorded_image_any_manifest_is_accepted(services):
    agent = await start(services)

    reply = await agent.ok(Verb.INIT_HELLO, hello(agent.session_id, image_version="dev"))

    assert reply["status"] == "fresh"


async def test_a_resumed_session_without_events_says_so(services):
    agent = await start(services)
    await services.sessions.mark_crashed(agent.session_id, "container died")
    again = await start(services)

    reply = await again.ok(Verb.INIT_HELLO, hello(again.session_id))

    assert (reply["status"], reply["snapshot"], reply["tail_events"]) == ("resumed", None, [])


async def test_a_hello_said_again_gets_the_same_answer_and_takes_nothing(
    services, pool, stage, clock
):
    """An agent says INIT_HELLO again when the answer was lost — choird died after handling
    it, or the call timed out (`choir.agent.start_retry`): the same choird, and a restarted one
    over the same database, answer it as the first time, and nothing is added or moved — no
    second session, lease or revision, the lease token the same."""
    first = await start(services)
    chain = Chain()
    chain.commit(3)
    await first.ok(Verb.HEARTBEAT, chain.heartbeat(0))
    await services.sessions.mark_crashed(first.session_id, "its container died")
    started = await services.sessions.start("agent-1", {}, image=IMAGE)  # resumes it
    agent = AgentClient(services, started)
    answer = await agent.ok(Verb.INIT_HELLO, hello(agent.session_id))
    assert (answer["status"], len(answer["tail_events"])) == ("resumed", 3)
    held = await control_state(pool)

    said_again = await agent.ok(Verb.INIT_HELLO, hello(agent.session_id))
    restarted = AgentServices.build(pool, stage, clock=clock)  # nothing of the first in memory
    to_a_new_choird = await AgentClient(restarted, started).ok(
        Verb.INIT_HELLO, hello(agent.session_id)
    )

    assert said_again == answer
    assert to_a_new_choird == answer
    assert await control_state(pool) == held


async def control_state(pool) -> tuple[list[tuple[object, ...]], list[object]]:
    """agent-1's sessions (status, lease, acknowledged head) and every lease held."""
    async with pool.acquire() as conn:
        rows = await conn.fetch(
            "SELECT session_id, status, lease_id, ack_rev, head_hash "
            "FROM choir_control.sessions WHERE agent_id = 'agent-1' ORDER BY session_id"
        )
        return [tuple(row) for row in rows], list(await all_leases(conn))


async def test_secrets_are_those_of_the_bound_resources(services):
    agent = await start(services, "agent-2")
    bound = [
        "brave-key",
        "elevenlabs-key",
        "git-token-2",
        "notion-key",
        "openrouter-key",
        "work-mail",
    ]

    reply = await agent.ok(Verb.GET_SECRETS, {"resources": bound})

    assert reply["secrets"] == {
        "brave-key": "brave-1",
        "elevenlabs-key": "el-1",
        "git-token-2": "ghp-2",
        "notion-key": "ntn-1",
        "openrouter-key": "sk-or-1",
        "work-mail": "mail-1",
    }
    assert "sk-or-1" not in repr(GetSecretsResponse.model_validate(reply))


@pytest.mark.parametrize("name", ["telegram-token", "news-mail", "no-such-secret"])
async def test_any_other_secret_is_refused_with_the_allowed_names(services, name):
    agent = await start(services, "agent-2")

    error = await agent.refused(Verb.GET_SECRETS, {"resources": ["openrouter-key", name]})

    assert error.code == ErrorCode.INVALID_REQUEST
    assert error.message == (
        f"secret(s) {name} are not bound to session {agent.session_id} (allowed: brave-key, "
        "elevenlabs-key, git-token-2, notion-key, openrouter-key, work-mail)"
    )


async def test_an_allowed_secret_that_is_not_set_is_not_found(services, home):
    (home.secrets_file).write_text("{}\n")
    await services.stage.reload_secrets()
    agent = await start(services)

    error = await agent.refused(Verb.GET_SECRETS, {"resources": ["brave-key"]})

    assert error.code == ErrorCode.NOT_FOUND
    assert error.message.startswith("secret(s) brave-key are not set: run choirctl secret set")


async def test_request_approval_stores_a_pending_approval(services):
    agent = await start(services)
    proposal = RequestApprovalRequest(request_type="tool", payload=TOOL_PROPOSAL)

    reply = await agent.ok(Verb.REQUEST_APPROVAL, proposal)

    assert reply["status"] == "pending"
    approval = await services.approvals.show(reply["approval_id"])
    assert (approval.agent_id, approval.session_id) == ("agent-1", agent.session_id)
    assert (approval.request_type, approval.payload) == ("tool", TOOL_PROPOSAL)


async def test_report_status_keeps_the_latest_per_lane(services, clock):
    agent = await start(services)
    edge = ReportStatusRequest(lane="edge", state="EDGE_REASONING")
    core = ReportStatusRequest(lane="core:fix-tests", state="CORE_REASONING", skill="tdd", step=2)

    assert await agent.ok(Verb.REPORT_STATUS, core) == {"ack": True}
    clock.advance(100)
    await agent.ok(Verb.REPORT_STATUS, edge)
    clock.advance(100)
    await agent.ok(Verb.REPORT_STATUS, edge.model_copy(update={"state": "EDGE_IDLE"}))

    lanes = services.status.lanes(agent.session_id)
    assert list(lanes) == ["edge", "core:fix-tests"]
    assert (lanes["edge"].report.state, lanes["edge"].at) == ("EDGE_IDLE", clock())
    assert lanes["core:fix-tests"].report == core
    await services.sessions.stop(agent.session_id, "stop")
    assert services.status.lanes(agent.session_id) == {}


@pytest.mark.parametrize(
    ("shutdown", "status"),
    [(None, SessionStatus.STOPPED), ("restart", SessionStatus.SUSPENDED)],
)
async def test_terminate_self_ends_the_session(services, pool, shutdown, status):
    agent = await start(services)
    if shutdown:
        services.sessions.expect_shutdown(agent.session_id, shutdown)

    assert await agent.ok(Verb.TERMINATE_SELF, TerminateSelfRequest(reason="summary flushed")) == {
        "ack": True
    }

    assert (await services.sessions.get(agent.session_id)).status == status
    async with pool.acquire() as conn:
        assert await all_leases(conn) == []
    error = await agent.refused(Verb.HEARTBEAT, Chain().heartbeat(0))
    assert error.code == ErrorCode.UNAUTHORIZED


async def test_fetch_dynamic_config_sends_the_hot_reloadable_part(services):
    agent = await start(services, "agent-2")

    current = await agent.ok(Verb.FETCH_DYNAMIC_CONFIG, {"current_config_version": 1})
    reply = await agent.ok(Verb.FETCH_DYNAMIC_CONFIG, {"current_config_version": 0})

    assert current == {"config_version": 1, "config": None}
    config = reply["config"]
    assert reply["config_version"] == 1
    assert set(config["models"]) == {"demo", "sonnet"}
    assert config["models"]["sonnet"]["secret"] == "openrouter-key"
    assert set(config["voice_profiles"]) == {"calm"}
    assert config["bindings"]["llm"] == "sonnet"
    assert config["bound"]["git_identity"]["email"] == "agent-2@choir.local"
    assert config["bound"]["email"]["smtp_host"] == "smtp.example.org"
    assert config["budgets"]["max_core_jobs"] == 20
    assert config["heartbeat_interval_ms"] == 5000
    for private in ("postgres", "gateways", "dms", "workspaces", "agents", "embedding"):
        assert private not in config


async def test_an_unknown_host_tool_is_an_error_result(services):
    agent = await start(services)

    reply = await agent.ok(
        Verb.EXECUTE_HOST_TOOL, ExecuteHostToolRequest(tool_name="choir.nope", call_id="c1")
    )

    assert (reply["call_id"], reply["status"]) == ("c1", "error")
    assert reply["output"]["error_code"] == "unknown_host_tool"


async def test_a_host_tool_runs_once_per_call_id(services):
    calls: list[HostToolCall] = []

    async def remember(call: HostToolCall) -> ToolResult:
        calls.append(call)
        return ToolResult.ok("stored", key=call.input["key"])

    async def broken(call: HostToolCall) -> ToolResult:
        raise NotFoundError("no such memory")

    services.host_tools.register("choir.memory.write", remember)
    services.host_tools.register("choir.memory.query", broken)
    agent = await start(services)
    request = ExecuteHostToolRequest(
        tool_name="choir.memory.write", call_id="c1", input={"key": "k"}
    )

    first = await agent.ok(Verb.EXECUTE_HOST_TOOL, request)
    again = await agent.ok(Verb.EXECUTE_HOST_TOOL, request)
    failed = await agent.ok(
        Verb.EXECUTE_HOST_TOOL, ExecuteHostToolRequest(tool_name="choir.memory.query", call_id="c2")
    )

    assert first == again
    assert (first["status"], first["output"]["data"]) == ("success", {"key": "k"})
    assert [(c.call_id, c.context.agent_id) for c in calls] == [("c1", "agent-1")]
    assert failed["status"] == "error"
    assert failed["output"]["error_code"] == "host_tool_failed"
    assert failed["output"]["summary"] == "choir.memory.query: no such memory"


async def test_calls_over_the_rate_limit_are_refused(services, home):
    data = read_config(home)
    data["rpc"]["rate_limit_per_s"] = 2
    write_config(home, data)
    await services.stage.load()
    services.stage.apply()
    agent = await start(services)
    report = ReportStatusRequest(lane="edge", state="EDGE_IDLE")

    await agent.ok(Verb.REPORT_STATUS, report)
    await agent.ok(Verb.REPORT_STATUS, report)
    error = await agent.refused(Verb.REPORT_STATUS, report)

    assert error.code == ErrorCode.RATE_LIMITED
    assert error.message.startswith("more than 2 requests per second (rpc.rate_limit_per_s)")


async def test_a_payload_over_the_cap_is_refused(services, home):
    data = read_config(home)
    data["rpc"]["max_payload_bytes"] = 1000
    write_config(home, data)
    await services.stage.load()
    services.stage.apply()
    agent = await start(services)
    chain = Chain()
    chain.commit(10)

    heartbeat = chain.heartbeat(0)
    error = await agent.refused(Verb.HEARTBEAT, heartbeat)

    assert error.code == ErrorCode.PAYLOAD_TOO_LARGE
    size = len(orjson.dumps(heartbeat.model_dump(mode="json")))  # the payload's, measured exactly
    assert error.message.startswith(f"payload of {size} bytes exceeds rpc.max_payload_bytes (1000)")


async def test_a_malformed_payload_is_an_invalid_request(services):
    agent = await start(services)

    error = await agent.refused(Verb.TERMINATE_SELF, {"why": "bored"})

    assert error.code == ErrorCode.INVALID_REQUEST
    assert error.message.startswith("TERMINATE_SELF payload: ")
    assert "reason: Field required" in error.message
    assert (await services.sessions.get(agent.session_id)).status == SessionStatus.ACTIVE


async def test_a_resend_while_the_call_runs_waits_for_the_same_execution(services):
    gate = asyncio.Event()
    runs: list[str] = []

    async def slow(call: HostToolCall) -> ToolResult:
        runs.append(call.call_id)
        await gate.wait()
        return ToolResult.ok("rendered")

    services.host_tools.register("choir.web.browse", slow)
    agent = await start(services)
    request = ExecuteHostToolRequest(tool_name="choir.web.browse", call_id="c9")

    calls = [asyncio.create_task(agent.ok(Verb.EXECUTE_HOST_TOOL, request)) for _ in range(3)]
    await asyncio.sleep(0.01)
    gate.set()
    replies = await asyncio.gather(*calls)

    assert runs == ["c9"]
    assert all(reply["status"] == "success" for reply in replies)


async def test_shutdown_cancels_host_calls_in_flight(services):
    started = asyncio.Event()

    async def endless(call: HostToolCall) -> ToolResult:
        started.set()
        await asyncio.Event().wait()
        return ToolResult.ok("never")

    services.host_tools.register("choir.web.browse", endless)
    agent = await start(services)
    call = asyncio.create_task(
        agent.call(Verb.EXECUTE_HOST_TOOL, {"tool_name": "choir.web.browse", "call_id": "c1"})
    )
    await started.wait()

    await services.host_tools.aclose()

    with pytest.raises(asyncio.CancelledError):
        await call


async def test_an_image_built_for_another_agent_is_refused(services):
    with pytest.raises(ConflictError, match="the image was built for agent-1, not agent-2"):
        await services.sessions.start("agent-2", {}, image=IMAGE)
