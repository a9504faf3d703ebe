"""Large model replies end to end (issue 12, point 1): nothing crashes, nothing becomes unreadable.

The shared cluster (`tests/harness/`): choird in the test process on the process runtime, the real
`choir-agent` it spawns, the scripted model answering with 2 MB and ~600 KB texts; the invariant
checker holds every run to issue 12's invariants. Before the fix a 2 MB reply crashed the agent
(its heartbeat exceeded the 1 MiB frame limit), and two 600 KB replies made every later resume
die on a too-large INIT_HELLO answer while `agent start` said "resumed" with exit 0, and
`session events` failed.

Now an event too large to travel whole is committed as a preview plus an artifact holding all of
it (chained by its sha256); every recovery path reads back in pages bounded by bytes; and a resume
that cannot work makes `agent start` / `agent restart` fail with one line and a non-zero exit.
"""

from __future__ import annotations

import json

import pytest

from choir.scripted import ReplyStep
from tests.faults.conftest import ClusterOf
from tests.faults.invariants import checker_for, crash_report
from tests.harness.cluster import Cluster, probe_step
from tests.harness.daemons import poll_until, pool_of, stored_events
from tests.lifecycle.support import choirctl, one_error_line

pytestmark = pytest.mark.slow


def text_of(size: int, tag: str) -> str:
    """About `size` bytes of numbered lines, so a cut is visible and nothing compresses away."""
    lines, total, n = [], 0, 0
    while total < size:
        line = f"{tag} line {n:07d}: the quick brown fox jumps over the lazy dog\n"
        lines.append(line)
        total += len(line)
        n += 1
    return "".join(lines).strip()  # edge strips a reply's text


BIG = text_of(2_000_000, "big")
MEDIUM_A = text_of(600_000, "alpha")
MEDIUM_B = text_of(600_000, "beta")

STEPS = [
    ReplyStep(match="big reply", repeat=True, text=BIG),
    ReplyStep(match="first medium", text=MEDIUM_A),
    ReplyStep(match="second medium", text=MEDIUM_B),
    probe_step(),
]

TAMPER = (
    "UPDATE choir_control.session_events SET payload = jsonb_set(payload, '{text}', "
    "'\"tampered\"') WHERE session_id = $1 AND event_type = 'user_msg'"
)
"""The stored history no longer chains: no resume can work from it."""


async def crashed(cluster: Cluster) -> bool:
    return await cluster.state("agent-1") == "crashed"


async def test_a_2mb_reply_reaches_the_user_and_the_agent_keeps_running(
    cluster_of: ClusterOf,
) -> None:
    cluster = await cluster_of(STEPS)
    checker = checker_for(cluster, require_accepted_messages=True)
    session_id = (await cluster.start("agent-1"))["session_id"]

    _, reply = await cluster.say("agent-1", "send me a big reply")

    assert reply["artifact"] is not None
    assert reply["artifact"]["size"] > len(BIG)
    assert BIG.startswith(reply["text"].split("\n[")[0])  # the preview is the reply's start
    assert (await cluster.client.session_event(session_id, reply["rev"]))["text"] == BIG
    assert await cluster.answers("agent-1")
    assert await cluster.state("agent-1") == "running"
    stored = await stored_events(cluster.daemon, session_id)
    assert max(len(json.dumps(e.payload)) for e in stored) < 256 * 1024
    shown = await choirctl(cluster.home, "chat", "agent-1", "one more big reply please")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout == BIG + "\n"
    await checker.verify(cluster.conversations.values())


async def test_two_600kb_replies_then_kill_9_resume_and_read_back(cluster_of: ClusterOf) -> None:
    cluster = await cluster_of(STEPS)
    checker = checker_for(cluster, require_accepted_messages=True)
    session_id = (await cluster.start("agent-1"))["session_id"]
    _, first = await cluster.say("agent-1", "first medium reply please")
    _, second = await cluster.say("agent-1", "second medium reply please")
    await checker.observe()
    checker.fault("kill -9 of agent-1 after two 600 KB replies")
    await cluster.kill("agent-1")
    await checker.reported(crash_report(cluster.client, "agent-1"))

    resumed = await choirctl(cluster.home, "agent", "start", "agent-1", "--dm", "console")

    assert resumed.returncode == 0, resumed.stderr
    assert f"session {session_id} (resumed)" in resumed.stdout
    await checker.healthy(lambda: cluster.answers("agent-1"))
    last_prompt = json.dumps(cluster.model.requests[-1].body["messages"])
    assert "alpha line 0000000" in last_prompt  # the restored history, as previews
    assert "beta line 0000000" in last_prompt
    listed = await choirctl(cluster.home, "session", "events", session_id, "--limit", "1000")
    assert listed.returncode == 0, listed.stderr
    hint = f"choirctl session events {session_id} --from-rev {second['rev']} -n 1 --full"
    assert hint in listed.stdout
    as_json = await choirctl(cluster.home, "session", "events", session_id, "--json")
    assert as_json.returncode == 0, as_json.stderr
    views = {e["rev"]: e for e in json.loads(as_json.stdout)["events"]}
    assert views[first["rev"]]["artifact"]["size"] > len(MEDIUM_A)
    whole = await choirctl(
        cluster.home,
        *("session", "events", session_id, "--from-rev", str(first["rev"])),
        *("-n", "1", "--full", "--json"),
    )
    assert whole.returncode == 0, whole.stderr
    assert json.loads(whole.stdout)["events"][0]["payload"]["text"] == MEDIUM_A
    assert (await cluster.client.session_event(session_id, second["rev"]))["text"] == MEDIUM_B
    await checker.verify(cluster.conversations.values())


async def test_a_resume_that_cannot_work_fails_with_one_line_and_a_non_zero_exit(
    cluster_of: ClusterOf,
) -> None:
    cluster = await cluster_of(STEPS)
    session_id = (await cluster.start("agent-1"))["session_id"]
    await cluster.say("agent-1", "first medium reply please")
    await cluster.kill("agent-1")
    await poll_until(lambda: crashed(cluster), within=15)
    async with pool_of(cluster.daemon).acquire() as conn:
        await conn.execute(TAMPER, session_id)

    done = await choirctl(cluster.home, "agent", "start", "agent-1", "--dm", "console")

    line = one_error_line(done, 1)
    assert line.startswith(f"error: agent-1 could not resume session {session_id}: ")
    assert "hash does not match" in line
    assert "--new-session" in line
    assert await cluster.state("agent-1") != "running"
    fresh = await choirctl(
        cluster.home, "agent", "start", "agent-1", "--dm", "console", "--new-session"
    )
    assert fresh.returncode == 0, fresh.stderr
    assert await cluster.answers("agent-1")


async def test_a_restart_whose_resume_fails_exits_non_zero(cluster_of: ClusterOf) -> None:
    cluster = await cluster_of(STEPS)
    session_id = (await cluster.start("agent-1"))["session_id"]
    assert await cluster.answers("agent-1")
    async with pool_of(cluster.daemon).acquire() as conn:
        await conn.execute(TAMPER, session_id)

    done = await choirctl(cluster.home, "agent", "restart", "agent-1")

    line = one_error_line(done, 1)
    assert f"could not resume session {session_id}" in line
    assert "hash does not match" in line
