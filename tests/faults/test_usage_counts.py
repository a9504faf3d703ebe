"""Usage counts survive kill -9 of the agent or of choird at the worst moments (issue 19).

Every LLM call is an `llm_call` event; choird stores its usage row in the transaction that makes
the event durable. So after any crash:

- every acknowledged call has exactly one usage row, and no row lacks its event (same session
  and revision): nothing acknowledged is lost, nothing is counted twice;
- while the agent lives (choird killed), every call the model answered is counted once: the
  agent resends what choird may or may not have stored, and a resend stores nothing twice;
- a killed agent loses at most the calls whose events choird had not acknowledged.

The agent runs on the process runtime (the real `choir-agent`) against the scripted model; the
agent's crash is placed with failpoints (`choir.failpoints`) around the heartbeat that carries
the call's event, choird's with SIGKILL of the real `choird` process while calls are made.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from choir.scripted import ReplyStep
from choir.scripted.script import ScriptedUsage
from choir.store.postgres.pool import connect
from choir.store.postgres.target import ConnectParams
from tests.faults.conftest import ClusterOf
from tests.faults.daemon_cluster import daemon_cluster
from tests.harness.cluster import Cluster, probe_step
from tests.harness.daemons import poll_until
from tests.harness.homes import short_root

pytestmark = [pytest.mark.slow, pytest.mark.serial]

USAGE = ScriptedUsage(prompt_tokens=100, completion_tokens=10, total_tokens=110, cost=0.001)
STEPS = [probe_step(), ReplyStep(match="count me", repeat=True, text="Counted.", usage=USAGE)]
HOLD_MS = 1500
"""How long the heartbeat failpoint holds the agent: the test kills it meanwhile."""

_ROWS = """
SELECT e.session_id, e.rev, u.rev AS usage_rev, u.prompt_tokens, u.cost_usd
FROM choir_control.session_events e
FULL JOIN choir_control.llm_usage u ON u.session_id = e.session_id AND u.rev = e.rev
WHERE e.event_type = 'llm_call' OR u.rev IS NOT NULL
"""


async def counted(pg: ConnectParams) -> list[dict[str, Any]]:
    """Each stored `llm_call` event joined with its usage row (either side may be missing)."""
    conn = await connect(pg)
    try:
        return [dict(row) for row in await conn.fetch(_ROWS)]
    finally:
        await conn.close()


def one_row_per_event(rows: list[dict[str, Any]]) -> None:
    unmatched = [row for row in rows if row["rev"] is None or row["usage_rev"] is None]
    assert unmatched == [], f"events and usage rows that do not pair up: {unmatched}"
    assert all((r["prompt_tokens"], r["cost_usd"]) == (100, 0.001) for r in rows)


def chat_requests(requests: list[Any]) -> int:
    return len([r for r in requests if r.body and "count me" in str(r.body["messages"][-1])])


@pytest.mark.timeout(90)
@pytest.mark.parametrize("point", ["heartbeat.after_send_before_ack", "heartbeat.before_send"])
async def test_a_killed_agent_loses_no_acknowledged_call_and_counts_none_twice(
    cluster_of: ClusterOf, point: str
) -> None:
    cluster: Cluster = await cluster_of(
        STEPS, heartbeat_interval_ms=500, crash_detection_threshold_ms=5000
    )
    await cluster.start("agent-1")
    await cluster.say("agent-1", "count me [1]")
    await poll_until(lambda: _stored_calls(cluster, 1), within=10)
    await cluster.client.agent_stop("agent-1")

    await cluster.start("agent-1", failpoints=f"{point}=sleep({HOLD_MS})")
    asked = chat_requests(cluster.model.requests)
    await cluster.conversation("agent-1").send("count me [2]")
    if point == "heartbeat.after_send_before_ack":
        # choird stored the call (and its usage row); the agent dies before it hears so
        await poll_until(lambda: _stored_calls(cluster, 2), within=10)
    else:  # the model answered; the call's event waits in the agent, never sent
        await poll_until(lambda: chat_requests(cluster.model.requests) > asked, within=10)
    await cluster.kill("agent-1")
    await poll_until(lambda: _crashed(cluster), within=15)

    await cluster.start("agent-1")  # resumes the session (failpoints disarmed)
    _, reply = await cluster.say("agent-1", "count me [3]")
    assert reply["category"] == "reply"

    async def settled() -> bool:
        rows = await counted(cluster.pg)
        return all(r["usage_rev"] is not None and r["rev"] is not None for r in rows)

    await poll_until(settled, within=10)
    rows = await counted(cluster.pg)
    one_row_per_event(rows)
    made = chat_requests(cluster.model.requests)
    if point == "heartbeat.after_send_before_ack":
        assert len(rows) == made  # acknowledged or not, the stored call counts, once
    else:
        # only a call never acknowledged can be missing; a message not yet durable is
        # delivered again after the resume, and that call is counted
        assert made - 1 <= len(rows) <= made
    total = (await cluster.client.usage(kind="llm")).total  # memory embedding is usage too
    assert total.calls == len(rows)
    assert total.cost_usd == pytest.approx(0.001 * len(rows))


@pytest.mark.timeout(240)
async def test_choird_killed_while_calls_are_made_counts_every_call_exactly_once() -> None:
    with short_root("cu-") as root:
        async with daemon_cluster(root, STEPS, heartbeat_interval_ms=300) as cluster:
            # the worst moment first: choird stored a call's event (and its usage row) and
            # dies before the agent hears so; the agent, alive, sends the batch again
            cluster.kill_choird()
            held = f"heartbeat.after_send_before_ack=sleep({HOLD_MS})"
            await cluster.restart_choird(CHOIR_FAILPOINTS=held)  # passed on to the agent
            await cluster.start("agent-1")
            conversation = cluster.conversation("agent-1")
            await conversation.send("count me [held]")
            await poll_until(lambda: _stored(cluster.pg, 1), within=15)
            await asyncio.to_thread(cluster.kill_choird)
            await cluster.restart_choird()
            for kill in range(1, 3):
                for n in range(3):
                    sent = await conversation.send(f"count me [{kill}/{n}]")
                    await cluster.reply_or_stored(sent, within=30)
                # mid-heartbeat when a call was just made: its event may be stored or not
                await conversation.send(f"count me [{kill}/last]")
                await asyncio.sleep(0.05 * kill)
                await asyncio.to_thread(cluster.kill_choird)
                await cluster.restart_choird()

            async def all_counted() -> bool:
                rows = await counted(cluster.pg)
                return len(rows) == chat_requests(cluster.model.requests) and all(
                    r["usage_rev"] is not None and r["rev"] is not None for r in rows
                )

            await poll_until(all_counted, within=30)
            rows = await counted(cluster.pg)
            one_row_per_event(rows)
            assert len(rows) == chat_requests(cluster.model.requests) == 9
            assert (await cluster.client.usage(kind="llm")).total.calls == 9


async def _stored_calls(cluster: Cluster, at_least: int) -> bool:
    return await _stored(cluster.pg, at_least)


async def _stored(pg: ConnectParams, at_least: int) -> bool:
    return len([r for r in await counted(pg) if r["rev"] is not None]) >= at_least


async def _crashed(cluster: Cluster) -> bool:
    return await cluster.state("agent-1") == "crashed"
