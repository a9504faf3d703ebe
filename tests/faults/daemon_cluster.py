"""N agents under a choird that a test can kill -9 and start again, on the home's own Postgres.

    async with daemon_cluster(root, script, agents=5, heartbeat_interval_ms=1000) as cluster:
        await cluster.start("agent-1")
        sent, reply = await cluster.say("agent-1", "work [agent-1/0]")
        cluster.kill_choird()              # SIGKILL; agents and the postmaster live on
        await cluster.restart_choird()     # a new `choird`, what systemd's Restart= would do
        cluster.kill_postmaster()          # SIGKILL; choird restarts it by itself

Unlike `tests.harness.cluster.running_cluster` (choird in the test process, on the test session's
Postgres), choird here is a real `choird --quiet` process on a `cluster_home` whose database is
its own embedded server — the configuration whose choird and postmaster can both be killed.
The operator's client and every agent's `Conversation` follow choird across restarts: after
`restart_choird` they are connected to the new one. A reply the old choird published just as it
died may never reach the conversation's stream (choird keeps the console's recent replies in
memory); `answer_stored` reads the durable log instead, which is what the invariants hold.
At the end everything is stopped: agents, tool processes, choird, the postmaster.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from choir.client import ChoirClient
from choir.home import ChoirHome
from choir.scripted import ReplyStep, Script, ScriptedModelServer, ToolCallsStep
from choir.store.postgres.pool import connect
from choir.store.postgres.postmaster import postmaster_pid
from choir.store.postgres.target import ConnectParams
from tests.faults.support import embedded_params, kill9, spawn_choird, teardown
from tests.harness.cluster import (
    ClusterAgents,
    Conversation,
    SentMessage,
    agent_ids,
    cluster_home,
    kill_left_tools,
)
from tests.harness.processes import Choird

_ANSWER_SQL = """
SELECT count(*) FROM choir_control.session_events e
JOIN choir_control.sessions s USING (session_id)
WHERE s.agent_id = $1 AND e.event_type = 'agent_replied' AND e.payload->>'in_reply_to' = $2
"""


@dataclass
class DaemonCluster(ClusterAgents):
    """choird as a process, its operator client, the scripted model, N agents."""

    root: Path
    home: ChoirHome
    model: ScriptedModelServer
    agents: tuple[str, ...]
    choird: Choird
    client: ChoirClient
    pg: ConnectParams = field(init=False)
    """Where choir's database is served (the same across postmaster restarts)."""
    conversations: dict[str, Conversation] = field(default_factory=dict)

    # -- faults and the supervisor's one step ------------------------------------------------

    def kill_choird(self) -> None:
        """SIGKILL choird and reap it; its agents and the postmaster keep running."""
        kill9(self.choird)

    async def restart_choird(self, **env: str) -> None:
        """Start a new choird (ready) with `env` added (e.g. CHOIR_FAILPOINTS, which it passes
        on to the agents it starts), and point the client and conversations at it."""
        self.choird = await asyncio.to_thread(
            spawn_choird, self.home, "--runtime", "process", **env
        )
        old, self.client = self.client, await ChoirClient.connect(self.home, call_timeout=30)
        for conversation in self.conversations.values():
            await conversation.follow(self.client)
        with contextlib.suppress(Exception):  # its choird is dead: closing may fail
            await old.close()

    def kill_postmaster(self) -> int:
        """SIGKILL the embedded postmaster (its backends follow); its pid."""
        pid = postmaster_pid(self.home.pgdata)
        assert pid is not None, "the embedded Postgres is not running"
        os.kill(pid, signal.SIGKILL)
        return pid

    # -- agents ------------------------------------------------------------------------------

    async def start(self, agent_id: str) -> dict[str, Any]:
        return (await self.client.agent_start(agent_id)).model_dump(mode="json")

    async def status(self, agent_id: str) -> dict[str, Any]:
        return (await self.client.agent_status(agent_id)).model_dump(mode="json")

    async def answer_stored(self, sent: SentMessage) -> bool:
        """Whether a reply (or error) to `sent` is in the durable log (False: Postgres away)."""
        try:
            conn = await connect(self.pg)
        except Exception:
            return False
        try:
            count = await conn.fetchval(_ANSWER_SQL, sent.agent_id, sent.message_id)
        finally:
            await conn.close()
        return bool(count)

    async def reply_or_stored(self, sent: SentMessage, *, within: float) -> str:
        """Wait until `sent` is answered, as the stream shows it or else as stored: `stream`
        or `stored`. AssertionError after `within` s."""
        conversation = self.conversation(sent.agent_id)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within
        while loop.time() < deadline:
            with contextlib.suppress(AssertionError):
                await conversation.reply_to(sent, within=1.0)
                return "stream"
            if await self.answer_stored(sent):
                return "stored"
        raise AssertionError(f"{sent.agent_id}: {sent.text!r} not answered within {within} s")


@contextlib.asynccontextmanager
async def daemon_cluster(
    root: Path,
    script: Script | Sequence[ReplyStep | ToolCallsStep],
    *,
    agents: int = 1,
    **settings: Any,
) -> AsyncIterator[DaemonCluster]:
    """choird (a process, process runtime, embedded Postgres) serving `agents` agents (none
    started), the model replaying `script`, a `Conversation` open on every agent's DM."""
    if not isinstance(script, Script):
        script = Script(description="fault scenario", steps=list(script))
    async with ScriptedModelServer(script) as model:
        home = cluster_home(root, None, model.url, agents, **settings)
        choird: Choird | None = None
        cluster: DaemonCluster | None = None
        try:
            choird = await asyncio.to_thread(spawn_choird, home, "--runtime", "process")
            client = await ChoirClient.connect(home, call_timeout=30)
            cluster = DaemonCluster(root, home, model, agent_ids(agents), choird, client)
            cluster.pg = await asyncio.to_thread(embedded_params, home)
            for agent_id in cluster.agents:
                cluster.conversations[agent_id] = Conversation(agent_id, client)
                await cluster.conversations[agent_id].open()
            yield cluster
        finally:
            if cluster is not None:
                for conversation in cluster.conversations.values():
                    await conversation.close()
                with contextlib.suppress(Exception):
                    await cluster.client.close()
                choird = cluster.choird
            await asyncio.to_thread(teardown, home, choird)
            kill_left_tools(root)
            keep_logs(home)


def keep_logs(home: ChoirHome) -> None:
    """Copy the home's logs to `$CHOIR_FAULT_LOGS/<root name>` when that is set (debugging)."""
    target = os.environ.get("CHOIR_FAULT_LOGS")
    if target:
        shutil.copytree(home.logs, Path(target) / home.root.parent.name, dirs_exist_ok=True)
