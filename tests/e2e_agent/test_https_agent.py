"""The real `choir-agent` over HTTPS (§12.1, §12.4): the path an agent takes off the host.

choird serves its agent verbs over HTTPS with a self-signed certificate (`running_daemon` is
`choird --transport http --tls-self-signed` past argument parsing); the agent is started with
`--control-plane=http --endpoint=https://… --ca-file=<choird's certificate>` and no socket at all,
so INIT_HELLO, heartbeats, the SSE push channel (a user message, the shutdown) and TERMINATE_SELF
can only have gone over TLS that the agent verified.
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from choir.agent.lanes.summary import SUMMARY_MARKER
from choir.client import ChoirClient
from choir.home import ChoirHome
from choir.scripted import ReplyStep, Script, ScriptedModelServer
from choir.store.postgres.target import ConnectParams
from choir.store.sessions import SessionStatus
from choir.transport.tls import create_self_signed
from tests.e2e_agent.launch import CHOIR_AGENT, agent_home, launch_agent
from tests.e2e_agent.test_agent_process import Agent, choir_root
from tests.e2e_agent.test_lanes import SUMMARY
from tests.harness.daemons import poll_until, running_daemon, session_row, stored_events
from tests.harness.homes import external_postgres, make_home, read_config, write_config
from tests.harness.processes import environment

pytestmark = pytest.mark.slow

SCRIPT = Script(
    steps=[
        ReplyStep(match=SUMMARY_MARKER, repeat=True, text=SUMMARY),
        ReplyStep(match="hello", repeat=True, text="Hello over TLS."),
    ]
)


@pytest.fixture
def script() -> Script:
    return SCRIPT


@pytest.fixture
def home(root: Path, pg_params: ConnectParams, model: ScriptedModelServer) -> ChoirHome:
    home = make_home(
        root,
        postgres=external_postgres(pg_params),
        heartbeat_interval_ms=300,
        crash_detection_threshold_ms=5_000,
    )
    data = read_config(home)
    data["models"]["demo"] = {"provider": "scripted", "model": "e2e", "endpoint": model.url}
    write_config(home, data)
    return home


@contextlib.asynccontextmanager
async def https_agent(
    home: ChoirHome, root: Path, model: ScriptedModelServer, *, ca_file: Path | None = None
) -> AsyncIterator[Agent]:
    workspace = root / "ws"
    workspace.mkdir(exist_ok=True)
    async with running_daemon(home) as daemon, await ChoirClient.connect(home) as operator:
        launched = await launch_agent(
            daemon,
            root,
            tree=choir_root(root),
            workspace=workspace,
            transport="https",
            ca_file=ca_file,
        )
        try:
            yield Agent(daemon, operator, model, launched.session_id, launched.process, workspace)
        finally:
            if launched.process.returncode is None:
                launched.process.kill()
            await launched.process.wait()


async def test_an_agent_over_https_chats_heartbeats_and_stops_gracefully(
    home: ChoirHome, root: Path, model: ScriptedModelServer
) -> None:
    async with https_agent(home, root, model) as agent:
        assert agent.daemon.http is not None
        assert agent.daemon.http.url.startswith("https://127.0.0.1:")
        assert not home.agent_socket("agent-1").exists()  # no socket: HTTPS is the only way in

        replies = await agent.chat("hello over https")
        assert [r["text"] for r in replies] == ["Hello over TLS."]
        status = await agent.operator.agent_status("agent-1")
        assert status.link == agent.daemon.http.url  # `agent status` says which way it came

        first = (await session_row(agent.daemon, agent.session_id)).last_heartbeat_at
        assert first is not None

        async def heartbeating() -> bool:
            row = await session_row(agent.daemon, agent.session_id)
            return row.last_heartbeat_at is not None and row.last_heartbeat_at > first

        await poll_until(heartbeating, within=5)

        agent.daemon.hub.push(agent.session_id, {"kind": "shutdown", "reason": "stop"})
        assert await asyncio.wait_for(agent.process.wait(), 20) == 0
        row = await session_row(agent.daemon, agent.session_id)
        assert row.status == SessionStatus.STOPPED
        kinds = [e.event_type for e in await stored_events(agent.daemon, agent.session_id)]
        kinds = [kind for kind in kinds if kind != "memory_recalled"]  # a cold first recall's
        assert kinds[:4] == ["user_msg", "llm_call", "model_output", "agent_replied"]
        assert kinds[-1] == "session_summary"


async def test_an_agent_refuses_a_choird_whose_certificate_it_does_not_trust(
    home: ChoirHome, root: Path, model: ScriptedModelServer
) -> None:
    stranger = root / "stranger.crt"
    create_self_signed(stranger, root / "stranger.key")
    async with https_agent(home, root, model, ca_file=stranger) as agent:
        code = await asyncio.wait_for(agent.process.wait(), 30)
        assert code != 0
        log = (root / "agent.log").read_text()
        assert "Traceback" not in log
        [line] = [line for line in log.splitlines() if line.startswith("error: ")]
        assert "certificate" in line.lower()
        assert agent.model.requests == []
        row = await session_row(agent.daemon, agent.session_id)
        assert row.ack_rev == 0


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        (lambda root: root / "missing.crt", "No such file or directory"),
        (lambda root: _written(root / "junk.crt", "not a certificate\n"), "NO_CERTIFICATE"),
    ],
    ids=["missing", "not-pem"],
)
def test_a_bad_ca_file_is_refused_in_one_line_before_connecting(
    root: Path, make: Callable[[Path], Path], reason: str
) -> None:
    ca_file = make(root)
    env = environment(
        CHOIR_AGENT_ID="agent-1",
        CHOIR_SESSION_ID="s-1",
        CHOIR_LEASE_TOKEN="lease",
        HOME=str(agent_home(root)),
    )
    done = subprocess.run(
        [
            str(CHOIR_AGENT),
            "--control-plane=http",
            "--endpoint=https://127.0.0.1:9",
            f"--ca-file={ca_file}",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    [line] = done.stderr.splitlines()
    assert line.startswith(f"error: --ca-file {ca_file}: not a readable PEM certificate (")
    assert reason in line
    assert "choird.crt" in line


def _written(path: Path, text: str) -> Path:
    path.write_text(text)
    return path
