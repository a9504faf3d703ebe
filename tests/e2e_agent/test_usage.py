"""Usage and cost end to end (issue 19): every LLM call of a real agent is one usage row, with
the provider's cost when reported, else the configured price, else unknown — and a spend cap
pauses the next call to ask an admin for more.

choird in the test process on the test session's Postgres, agent-1 started by it on the process
runtime (the real `choir-agent`), the scripted model reporting fixed token counts (and, for one
step, a cost as OpenRouter reports it). Prices and caps are changed as an operator does:
config.json edited, then `config load` + `config apply`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from choir.client import ChoirClient
from choir.errors import ConflictError, NotFoundError
from choir.protocol.operator.verbs import OperatorVerb as V
from choir.protocol.operator.views import ApprovalView
from choir.scripted import ReplyStep, ScriptedCall, ToolCallsStep
from choir.scripted.script import ScriptedUsage
from choir.store.postgres.pool import connect
from choir.store.postgres.target import ConnectParams
from tests.ctl.cli import choirctl
from tests.harness.agent_logs import agent_log_text
from tests.harness.cluster import Cluster, running_cluster
from tests.harness.daemons import poll_until
from tests.harness.homes import make_home, read_config, write_config

pytestmark = pytest.mark.slow


def tokens(
    prompt: int, completion: int, cached: int = 0, cost: float | None = None
) -> ScriptedUsage:
    return ScriptedUsage(
        prompt_tokens=prompt,
        completion_tokens=completion,
        total_tokens=prompt + completion,
        cached_tokens=cached,
        cost=cost,
    )


PRICE = {"prompt": 2.0, "completion": 10.0, "cached": 0.5}
"""USD per million tokens."""
HELLO = tokens(1000, 200, cached=400)
HELLO_USD = (600 * 2.0 + 400 * 0.5 + 200 * 10.0) / 1e6  # 0.0034
ROUTED_USD = 0.0123
"""What the provider reports for the `routed` call: preferred to the price."""
SPAWN, STARTED, DIGEST = tokens(50, 20), tokens(60, 5), tokens(300, 30)
JOB_USD = (300 * 2.0 + 30 * 10.0) / 1e6

STEPS = [
    ReplyStep(match="hello", repeat=True, text="Hello.", usage=HELLO),
    ReplyStep(match="routed", repeat=True, text="Routed.", usage=tokens(10, 5, cost=ROUTED_USD)),
    ToolCallsStep(
        match="digest please",
        usage=SPAWN,
        calls=[
            ScriptedCall(
                name="choir.core.spawn",
                arguments={"job_name": "digest", "task_spec": "Digest the notes."},
            )
        ],
    ),
    ReplyStep(after="tool", match="core job digest started", text="Started.", usage=STARTED),
    # a core job's first request has no user or tool message: only this step matches it
    ReplyStep(text="Digest done.", usage=DIGEST),
]


@pytest.fixture
async def cluster(root: Path, pg_params: ConnectParams) -> AsyncIterator[Cluster]:
    async with running_cluster(root, pg_params, STEPS) as cluster:
        yield cluster


async def configure(cluster: Cluster, *, price: Any = "keep", cap: Any = "keep") -> None:
    """Set (None: remove) the demo model's price and agent-1's spend cap; load and apply."""
    data = read_config(cluster.home)
    for section, value in ((data["models"]["demo"], price), (data["agents"]["agent-1"], cap)):
        key = "price" if section is data["models"]["demo"] else "spend_cap"
        if value is None:
            section.pop(key, None)
        elif value != "keep":
            section[key] = value
    write_config(cluster.home, data)
    await cluster.client.config_load()
    await cluster.client.config_apply()

    async def caught_up() -> bool:  # a running agent fetches the new version on a heartbeat
        status = await cluster.client.agent_status("agent-1")
        return status.state != "running" or not status.config_behind

    await poll_until(caught_up, within=10)


async def llm_call_events(cluster: Cluster) -> list[dict[str, Any]]:
    conn = await connect(cluster.pg)
    try:
        rows = await conn.fetch(
            "SELECT rev, payload FROM choir_control.session_events WHERE event_type = 'llm_call'"
        )
    finally:
        await conn.close()
    return [row["payload"] for row in rows]


def chat_requests(cluster: Cluster) -> int:
    return len([r for r in cluster.model.requests if r.path.endswith("/chat/completions")])


async def all_recorded(client: ChoirClient, calls: int) -> None:
    """The model's `calls` recorded (a recall's embedding of a message is a call of its own)."""

    async def counted() -> bool:
        return (await client.usage(kind="llm")).total.calls == calls

    await poll_until(counted, within=10)


async def test_every_call_is_recorded_once_with_the_providers_cost_else_the_price(
    cluster: Cluster,
) -> None:
    client = cluster.client
    await configure(cluster, price=PRICE)
    await cluster.start("agent-1")
    await cluster.say("agent-1", "hello")
    await cluster.say("agent-1", "routed")
    conversation = cluster.conversation("agent-1")
    await conversation.send("digest please")
    await conversation.wait_for(
        lambda r: "core job digest completed" in r["text"], within=30, what="the job's report"
    )
    calls = chat_requests(cluster)
    await all_recorded(client, calls)

    report = await client.usage(by="model", kind="llm")
    [row] = report.rows
    assert row.key == "demo"
    assert row.calls == calls == 5
    assert row.prompt_tokens == 1000 + 10 + 50 + 60 + 300
    assert row.completion_tokens == 200 + 5 + 20 + 5 + 30
    assert row.cached_tokens == 400
    assert row.unknown_cost_calls == 0
    spawn_usd = (50 * 2.0 + 20 * 10.0) / 1e6
    started_usd = (60 * 2.0 + 5 * 10.0) / 1e6
    expected = HELLO_USD + ROUTED_USD + spawn_usd + started_usd + JOB_USD
    assert row.cost_usd == pytest.approx(expected)
    events = await llm_call_events(cluster)
    assert len(events) == calls
    assert sorted(e["cost_source"] for e in events) == ["price"] * 4 + ["provider"]

    by_job = {r.key: r for r in (await client.usage(by="job", kind="llm")).rows}
    [job_id] = [key for key in by_job if key != "edge"]
    assert by_job[job_id].cost_usd == pytest.approx(JOB_USD)
    assert by_job["edge"].calls == 4
    [top] = (await client.usage(kind="llm")).top_jobs
    assert (top.agent_id, top.job_id, top.lane) == ("agent-1", job_id, "core:digest")
    assert [r.key for r in (await client.usage(by="agent", kind="llm")).rows] == ["agent-1"]

    # no price any more: the next call's cost is unknown — shown so, never summed as 0
    await configure(cluster, price=None)
    await cluster.say("agent-1", "hello")
    await all_recorded(client, calls + 1)
    [row] = (await client.usage(by="model", kind="llm")).rows
    assert row.unknown_cost_calls == 1
    assert row.cost_usd == pytest.approx(expected)
    status = await client.agent_status("agent-1")
    assert status.spend is not None
    assert status.spend.unknown_cost_calls == 1
    assert status.spend.day_usd == pytest.approx(expected)

    # choirctl prints the same; an unknown agent or model is one line, exit 4
    home = cluster.home.root
    shown = await asyncio.to_thread(choirctl, home, "usage", "--by", "model")
    assert shown.code == 0, shown.err
    assert "+ 1 unknown" in shown.out
    as_json = (
        await asyncio.to_thread(choirctl, home, "usage", "--json", "--since", "7d", "--kind", "llm")
    ).json()
    assert as_json["total"]["calls"] == calls + 1
    for args, named in ((("--agent", "nobody"), "no agent named 'nobody'"),
                        (("--model", "gpt-9"), "no model named 'gpt-9'")):  # fmt: skip
        refused = await asyncio.to_thread(choirctl, home, "usage", *args)
        assert refused.code == 4, refused
        assert named in refused.err
        assert len(refused.err.strip().splitlines()) == 1
    bad = await asyncio.to_thread(choirctl, home, "usage", "--since", "last week")
    assert bad.code == 2
    assert "YYYY-MM-DD" in bad.err
    with pytest.raises(NotFoundError):
        await client.usage(agent_id="nobody")


async def spend_question(client: ChoirClient) -> ApprovalView:
    """The one pending budget question, once it is asked."""
    found: list[ApprovalView] = []

    async def asked() -> bool:
        pending = (await client.approval_list()).approvals
        found[:] = [a for a in pending if a.request_type == "budget_extension"]
        return bool(found)

    await poll_until(asked, within=20)
    [view] = found
    return view


async def test_a_reached_spend_cap_asks_an_admin_before_the_next_call(
    cluster: Cluster,
) -> None:
    client = cluster.client
    await configure(cluster, price=PRICE, cap={"day_usd": 0.003})
    await cluster.start("agent-1")
    _, reply = await cluster.say("agent-1", "hello")  # 0.0034: the cap is passed by this one
    assert reply["category"] == "reply"
    asked = chat_requests(cluster)

    conversation = cluster.conversation("agent-1")
    sent = await conversation.send("hello again")
    question = await spend_question(client)
    assert question.payload["budget"] == "spend_cap_day_usd"
    assert (question.payload["limit"], question.payload["used"]) == (0.003, 0.0034)
    assert (question.payload["unit"], question.payload["suggested"]) == ("USD", 1)
    notice = await conversation.wait_for(lambda r: "is paused" in r["text"], what="the pause")
    paused = notice["text"]
    assert paused.startswith("edge is paused: spend cap reached")
    assert "agents.agent-1.spend_cap.day_usd is $0.0030" in paused
    assert f"choirctl approval extend {question.approval_id} <USD>" in paused
    assert chat_requests(cluster) == asked  # the call was not made
    status = await client.agent_status("agent-1")
    assert status.spend is not None
    assert status.spend.cap_reached is not None
    assert "day_usd" in status.spend.cap_reached
    assert status.link == "unix socket"
    assert "spend cap reached" in agent_log_text(cluster.home, "agent-1")

    # the user's own (regular) DM may not raise the operator's cap; nothing is decided
    with pytest.raises(ConflictError, match="only an admin DM, choirctl or the console"):
        await client.ask(
            V.APPROVAL_EXTEND,
            ApprovalView,
            approval_id=question.approval_id,
            amount=5,
            by="dm-of-agent-1",
            agent_id="agent-1",
        )
    assert (await client.approval_show(question.approval_id)).status == "pending"

    await client.approval_extend(question.approval_id, 1)  # choirctl: $1 beyond today's cap
    answered = await conversation.reply_to(sent)
    assert (answered["category"], answered["text"]) == ("reply", "Hello.")
    assert chat_requests(cluster) == asked + 1
    _, reply = await cluster.say("agent-1", "hello within the grant")
    assert reply["category"] == "reply"

    # a new session of the agent starts from what choird counted, without the grant: it asks
    await client.agent_stop("agent-1")
    await cluster.start("agent-1")
    asked = chat_requests(cluster)
    sent = await cluster.conversation("agent-1").send("hello once more")
    question = await spend_question(client)
    await client.approval_reject(question.approval_id)
    refused = await cluster.conversation("agent-1").reply_to(sent)
    assert refused["category"] == "error"
    assert refused["text"].startswith("spend cap reached: agent agent-1 has spent $")
    assert refused["text"].endswith(f"the extension was refused ({question.approval_id})")
    assert chat_requests(cluster) == asked

    await configure(cluster, cap={"day_usd": 1.0, "month_usd": 20.0})

    async def answered_now() -> bool:
        _, reply = await cluster.say("agent-1", "hello after the raise")
        return bool(reply["category"] == "reply")

    await poll_until(answered_now, within=10)
    status = await client.agent_status("agent-1")
    assert status.spend is not None
    assert status.spend.cap_reached is None
    assert status.spend.month_cap_usd == 20.0


def test_config_check_refuses_a_negative_price_and_a_zero_cap(tmp_path: Path) -> None:
    home = make_home(tmp_path)
    data = read_config(home)
    data["models"]["demo"]["price"] = {"prompt": -1, "completion": 1}
    data["agents"]["agent-1"]["spend_cap"] = {"day_usd": 0}
    write_config(home, data)
    checked = choirctl(home.root, "config", "check")
    assert checked.code == 3, checked
    assert "models.demo.price.prompt" in checked.err
    assert "agents.agent-1.spend_cap.day_usd" in checked.err


async def test_a_core_job_that_meets_the_cap_asks_too_and_goes_on_when_allowed(
    cluster: Cluster,
) -> None:
    client = cluster.client
    await configure(cluster, price=PRICE, cap={"day_usd": 0.0036})
    await cluster.start("agent-1")
    await cluster.say("agent-1", "hello")  # $0.0034, under the cap
    conversation = cluster.conversation("agent-1")
    await conversation.send("digest please")  # the spawn call passes the cap: edge and job ask

    questions: dict[str, ApprovalView] = {}

    async def both_asked() -> bool:
        pending = (await client.approval_list()).approvals
        questions.update({str(a.payload["lane"]): a for a in pending})
        return {"edge", "core:digest"} <= questions.keys()

    await poll_until(both_asked, within=30)
    job = questions["core:digest"]
    assert (job.payload["budget"], job.payload["job_name"]) == ("spend_cap_day_usd", "digest")
    made = chat_requests(cluster)
    for question in questions.values():
        await client.approval_extend(question.approval_id, 1)
    await conversation.wait_for(
        lambda r: r["text"] == "core job digest completed: Digest done.", what="the job's report"
    )
    assert chat_requests(cluster) == made + 2  # edge's reply and the job's step, once each
