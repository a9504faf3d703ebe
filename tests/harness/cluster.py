"""A real choird with N agents on the process runtime and a scripted model: the shared harness.

    async with running_cluster(root, pg_params, script, agents=2) as cluster:
        await cluster.start("agent-1")
        sent, replies = await cluster.say("agent-1", "hello")

choird runs in the test process (`running_daemon`, the production composition root) on the test
session's Postgres; every agent is a real `choir-agent` process that choird's process runtime
starts (`agent.start`, exactly as `choirctl agent start` does), with its own workspace
(`root/ws/<agent-id>`) and its own console DM (`dm-<agent-id>`, agent-1 keeps `console`).
All agents share agent-1's repo, which carries `test.effect` (`EFFECT_TOOL`): a non-idempotent
tool that appends its `token` argument as one line to `effects.log` in the workspace, then sleeps
`sleep_ms` — the side effect fault tests count. Every process the tool starts records its pid,
and the cluster kills any still alive at the end (a safety net: a tool's subreaper ends it
when its agent dies).

`Cluster.start(..., failpoints=...)` arms `CHOIR_FAILPOINTS` for that one start: choird's process
runtime passes the variable on to the agent it spawns, and the harness sets it only around the
call. `Conversation` follows one agent's console DM for the whole test (across crashes and
restarts): every message sent and every reply seen, so an `InvariantChecker` can hold choird to
them (`tests/faults/invariants.py`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from choir.client import ChoirClient
from choir.config.scaffolding.gitrepo import git
from choir.daemon.app import ChoirDaemon
from choir.failpoints import ENV_VAR as FAILPOINTS_ENV
from choir.home import ChoirHome
from choir.scripted import ReplyStep, Script, ScriptedCall, ScriptedModelServer, ToolCallsStep
from choir.store.postgres.target import ConnectParams
from tests.harness.daemons import running_daemon
from tests.harness.homes import external_postgres, make_home, read_config, write_config

EFFECT_TOOL: Final = "test.effect"
"""The side-effect tool every cluster agent has."""
EFFECTS_FILE: Final = "effects.log"
"""Where `test.effect` appends, relative to the workspace."""
REPLY_TIMEOUT_S: Final = 20.0

_EFFECT_SCRIPT = """#!{python}
import json, os, sys, time
arguments = json.load(sys.stdin)["arguments"]
with open({pids!r}, "a") as pids:
    pids.write(f"{{os.getpid()}}\\n")
fd = os.open({effects!r}, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
os.write(fd, (arguments["token"] + "\\n").encode())
os.close(fd)
time.sleep(arguments.get("sleep_ms", 0) / 1000)
print(json.dumps({{"status": "success", "summary": "appended [" + arguments["token"] + "]"}}))
"""

_EFFECT_MANIFEST: dict[str, Any] = {
    "llm": {
        "name": EFFECT_TOOL,
        "description": "Append a token to effects.log, then pause (test tool).",
        "parameters": {
            "type": "object",
            "properties": {
                "token": {"type": "string"},
                "sleep_ms": {"type": "integer", "minimum": 0},
            },
            "required": ["token"],
            "additionalProperties": False,
        },
    },
    "runtime": {
        "implementation": "external",
        "exec_path": f"/choir/tools/agent/{EFFECT_TOOL}",
        "timeout_ms": 60_000,
        "locks": [{"resource": f"file:{EFFECTS_FILE}", "mode": "X"}],
        "side_effect": "write",
        "idempotent": False,
    },
}


# -- scripts -------------------------------------------------------------------------------


def effect_call(token: str, sleep_ms: int = 0) -> ScriptedCall:
    """A `test.effect` call appending `token`."""
    return ScriptedCall(name=EFFECT_TOOL, arguments={"token": token, "sleep_ms": sleep_ms})


def effect_turn(token: str, sleep_ms: int = 0) -> list[ReplyStep | ToolCallsStep]:
    """Steps answering a user message containing `[token]`: one `test.effect` call appending
    `token`, then the reply `done [token]`. Tokens must differ from each other in full (the
    brackets keep `a/1` from matching `a/10`)."""
    return [
        ToolCallsStep(match=f"[{token}]", calls=[effect_call(token, sleep_ms)]),
        ReplyStep(after="tool", match=f"appended [{token}]", text=f"done [{token}]"),
    ]


PROBE: Final = "[probe]"
"""Text of the messages `Cluster.answers` sends; `probe_step` answers them."""


def probe_step() -> ReplyStep:
    """A step answering every probe with `pong`."""
    return ReplyStep(match=PROBE, repeat=True, text="pong")


# -- the home ------------------------------------------------------------------------------


def agent_ids(count: int) -> tuple[str, ...]:
    return tuple(f"agent-{n}" for n in range(1, count + 1))


def cluster_home(
    root: Path, pg_params: ConnectParams | None, model_url: str, agents: int = 1, **settings: Any
) -> ChoirHome:
    """`choirctl init`'s home on the test's Postgres (`pg_params`; None: the home's own embedded
    server): `agents` agents, each with its own workspace, console DM and repo (a clone of
    agent-1's: a proposal may change only its own agent's repo), the demo model pointed at
    `model_url`, `settings` applied, and `test.effect` in every agent's repo."""
    postgres = external_postgres(pg_params) if pg_params is not None else None
    home = make_home(root, postgres=postgres, **settings)
    data = read_config(home)
    data["models"]["demo"] = {"provider": "scripted", "model": "faults", "endpoint": model_url}
    repo = data["agents"]["agent-1"]["repo"]
    add_effect_tool(Path(repo["url"]), root / "tool-pids")
    data["agents"] = {}
    for agent_id in agent_ids(agents):
        dm = "console" if agent_id == "agent-1" else f"dm-{agent_id}"
        if dm != "console":
            data["dms"][dm] = {"gateway": "console", "user_id": f"user-{agent_id}"}
        data["workspaces"][agent_id] = {"path": str(root / "ws" / agent_id)}
        (root / "ws" / agent_id).mkdir(parents=True)
        data["git_identities"].setdefault(
            agent_id, {"name": f"choir {agent_id}", "email": f"{agent_id}@choir.local"}
        )
        own = repo
        if agent_id != "agent-1":
            own = {**repo, "url": str(root / "repos" / agent_id)}
            git(root, "clone", "-q", repo["url"], own["url"])
        data["agents"][agent_id] = {
            "repo": own,
            "defaults": {"workspace": agent_id, "llm": "demo", "git_identity": agent_id, "dm": dm},
        }
    write_config(home, data)
    return home


def add_effect_tool(repo: Path, pids: Path) -> None:
    """`test.effect` committed into the agent repo `repo`; its runs log their pids to `pids`."""
    tools = repo / "tools"
    (tools / f"{EFFECT_TOOL}.json").write_text(json.dumps(_EFFECT_MANIFEST, indent=2) + "\n")
    script = tools / EFFECT_TOOL
    script.write_text(
        _EFFECT_SCRIPT.format(python=sys.executable, pids=str(pids), effects=EFFECTS_FILE)
    )
    script.chmod(0o755)
    git(repo, "add", "--", "tools")
    git(repo, "commit", "-q", "-m", "add test.effect")


def kill_left_tools(root: Path) -> None:
    """SIGKILL every `test.effect` process still alive (its subreaper should have ended it)."""
    pids = root / "tool-pids"
    for line in pids.read_text().split() if pids.exists() else []:
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(line), signal.SIGKILL)


@contextlib.contextmanager
def armed_failpoints(spec: str | None) -> Iterator[None]:
    """`CHOIR_FAILPOINTS=spec` in this process (choird's) for the duration; unset after."""
    if not spec:
        yield
        return
    saved = os.environ.get(FAILPOINTS_ENV)
    os.environ[FAILPOINTS_ENV] = spec
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(FAILPOINTS_ENV, None)
        else:
            os.environ[FAILPOINTS_ENV] = saved


# -- conversations -------------------------------------------------------------------------


@dataclass(frozen=True)
class SentMessage:
    """One user message choird accepted (`chat.send` answered without an error)."""

    agent_id: str
    text: str
    message_id: str | None
    """The console DM's id of the message; None when the gateway gave none."""
    acknowledged: bool = False
    """Whether the sender was told the message is durable (chat.send's answer says so)."""


@dataclass
class Conversation:
    """One agent's console DM, followed for the whole test: sent messages and seen replies."""

    agent_id: str
    client: ChoirClient
    sent: list[SentMessage] = field(default_factory=list)
    replies: list[dict[str, Any]] = field(default_factory=list)
    _arrived: asyncio.Condition = field(default_factory=asyncio.Condition)
    _reader: asyncio.Task[None] | None = None

    async def open(self) -> None:
        stream = self.client.chat_replies(self.agent_id)
        ready = asyncio.Event()

        async def read() -> None:
            ready.set()
            async with contextlib.aclosing(stream):
                async for reply in stream:
                    async with self._arrived:
                        self.replies.append(reply.model_dump(mode="json"))
                        self._arrived.notify_all()

        self._reader = asyncio.create_task(read(), name=f"replies-{self.agent_id}")
        await ready.wait()

    async def follow(self, client: ChoirClient) -> None:
        """Follow the DM through `client` from now on (a restarted choird's): its stream
        starts with the replies that choird published so far."""
        await self.close()
        self.client = client
        await self.open()

    async def close(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reader

    async def send(self, text: str) -> SentMessage:
        """Send `text`; recorded as sent only when choird accepted it."""
        answer = await self.client.chat_send(self.agent_id, text)
        # chat.send answers `durable` once the message is stored in choird's inbox (issue 12,
        # item 2): from then on it must reach the agent exactly once
        sent = SentMessage(self.agent_id, text, answer.message_id, bool(answer.durable))
        self.sent.append(sent)
        return sent

    async def reply_to(
        self, sent: SentMessage, *, within: float = REPLY_TIMEOUT_S
    ) -> dict[str, Any]:
        """The reply (or error) answering `sent`; AssertionError after `within` s."""
        return await self.wait_for(
            lambda r: r["in_reply_to"] == sent.message_id and r["category"] in ("reply", "error"),
            within=within,
            what=f"a reply to {sent.text!r}",
        )

    async def wait_for(
        self, matches: Any, *, within: float = REPLY_TIMEOUT_S, what: str = "a reply"
    ) -> dict[str, Any]:
        """The first reply seen (already or later) for which `matches(reply)` holds."""
        try:
            async with asyncio.timeout(within), self._arrived:
                while True:
                    found = next((r for r in self.replies if matches(r)), None)
                    if found is not None:
                        return found
                    await self._arrived.wait()
        except TimeoutError:
            seen = [(r["category"], r["text"][:80]) for r in self.replies[-5:]]
            raise AssertionError(
                f"{self.agent_id}: no {what} within {within} s; last: {seen}"
            ) from None


# -- the cluster ---------------------------------------------------------------------------


class ClusterAgents:
    """What every cluster offers on its agents, however its choird runs (`Cluster` here, in the
    test process; `tests.faults.daemon_cluster.DaemonCluster`, a process a test can kill):
    each agent's workspace and effects file, and its console DM followed as a `Conversation`."""

    root: Path
    conversations: dict[str, Conversation]

    def workspace(self, agent_id: str) -> Path:
        return self.root / "ws" / agent_id

    def effects(self, agent_id: str) -> Path:
        """The file `test.effect` appends to in `agent_id`'s workspace."""
        return self.workspace(agent_id) / EFFECTS_FILE

    def conversation(self, agent_id: str) -> Conversation:
        return self.conversations[agent_id]

    async def say(self, agent_id: str, text: str) -> tuple[SentMessage, dict[str, Any]]:
        """Send `text` and wait for its reply (or error)."""
        conversation = self.conversation(agent_id)
        sent = await conversation.send(text)
        return sent, await conversation.reply_to(sent)

    async def answers(self, agent_id: str) -> bool:
        """Whether the agent answers a probe message with a normal reply right now."""
        try:
            _, reply = await self.say(agent_id, f"are you there? {PROBE}")
        except Exception:  # not running, choird or its database away, no reply in time
            return False
        return bool(reply["category"] == "reply")


@dataclass
class Cluster(ClusterAgents):
    """choird in the test process, its operator client, the scripted model, N agents."""

    root: Path
    home: ChoirHome
    pg: ConnectParams
    model: ScriptedModelServer
    daemon: ChoirDaemon
    client: ChoirClient
    agents: tuple[str, ...]
    conversations: dict[str, Conversation] = field(default_factory=dict)

    async def start(self, agent_id: str, *, failpoints: str | None = None) -> dict[str, Any]:
        """`agent start` (a crashed or suspended session resumes), `failpoints` armed in it."""
        with armed_failpoints(failpoints):
            return (await self.client.agent_start(agent_id)).model_dump(mode="json")

    async def pid(self, agent_id: str) -> int | None:
        """The agent's process id while it runs (`agent status`)."""
        pid = (await self.client.agent_status(agent_id)).pid
        return int(pid) if pid is not None else None

    async def kill(self, agent_id: str) -> int:
        """kill -9 of the agent's process (only it, as in a real crash: its tools' subreapers
        end them)."""
        pid = await self.pid(agent_id)
        assert pid is not None, f"{agent_id} is not running"
        os.kill(pid, signal.SIGKILL)
        return pid

    async def state(self, agent_id: str) -> str:
        """`running`, `crashed` or `stopped`, as `choirctl agent status` shows it."""
        return str((await self.client.agent_status(agent_id)).state)


async def stop_agents(client: ChoirClient) -> None:
    """Stop every agent still running (gracefully, all at once) at a test's end."""

    async def stop(agent_id: str) -> None:
        with contextlib.suppress(Exception):  # the test stopped or broke it already
            await client.agent_stop(agent_id)

    agents = (await client.agent_list()).agents
    await asyncio.gather(*(stop(a.agent_id) for a in agents if a.state == "running"))


@contextlib.asynccontextmanager
async def serving(
    home: ChoirHome, *, call_timeout: float | None = None
) -> AsyncIterator[tuple[ChoirDaemon, ChoirClient]]:
    """choird in this process serving `home` on the process runtime, and an operator client
    (no call timeout by default: a graceful stop takes a moment). Agents still running at the
    end are stopped."""
    async with (
        running_daemon(home) as daemon,
        await ChoirClient.connect(home, call_timeout=call_timeout) as client,
    ):
        try:
            yield daemon, client
        finally:
            await stop_agents(client)


@contextlib.asynccontextmanager
async def running_cluster(
    root: Path,
    pg_params: ConnectParams,
    script: Script | Sequence[ReplyStep | ToolCallsStep],
    *,
    agents: int = 1,
    **settings: Any,
) -> AsyncIterator[Cluster]:
    """choird serving a `cluster_home` with `agents` agents (none started), the model replaying
    `script`, and a `Conversation` open on every agent's DM. At the end every agent still
    running is stopped and every tool process left is killed."""
    if not isinstance(script, Script):
        script = Script(description="fault scenario", steps=list(script))
    async with ScriptedModelServer(script) as model:
        home = cluster_home(root, pg_params, model.url, agents, **settings)
        try:
            async with serving(home) as (daemon, client):
                cluster = Cluster(root, home, pg_params, model, daemon, client, agent_ids(agents))
                for agent_id in cluster.agents:
                    cluster.conversations[agent_id] = Conversation(agent_id, client)
                    await cluster.conversations[agent_id].open()
                try:
                    yield cluster
                finally:
                    await stop_agents(client)
                    for conversation in cluster.conversations.values():
                        await conversation.close()
        finally:
            kill_left_tools(root)
