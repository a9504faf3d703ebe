"""Interactive `choirctl chat agent-1`: lines typed on stdin go out, replies print, EOF leaves.

The real CLI runs in a subprocess against a served operator socket; the agent side is a real
HEARTBEAT shipping an `agent_replied` event, as in tests/daemon/test_console_chat.py.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

from tests.daemon.agent import AgentClient, Chain
from tests.daemon.operator_served import Operator, served_operator  # noqa: F401  (fixture)
from tests.daemon.test_console_chat import reply, ship
from tests.harness.daemons import poll_until

CHOIRCTL = Path(sys.executable).parent / "choirctl"
PROMPT = "you> "
"""What `input()` writes before each line; it lands on stdout between replies."""


async def test_interactive_chat_prints_the_reply_and_exits_at_eof(
    operator: Operator,
) -> None:
    started = await operator.services.sessions.start("agent-1", {})
    agent, chain = AgentClient(operator.services, started), Chain()
    process = await asyncio.create_subprocess_exec(
        str(CHOIRCTL),
        "chat",
        "agent-1",
        env={**os.environ, "CHOIR_HOME": str(operator.home.root)},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdin is not None
    assert process.stdout is not None
    try:
        process.stdin.write(b"hello\n")
        await process.stdin.drain()
        await poll_until(lambda: bool(operator.pushes.sent), within=20)
        [(session_id, push)] = operator.pushes.sent
        assert session_id == started.session_id
        assert (push["kind"], push["text"]) == ("user_message", "hello")
        reply(chain, "Hello! How can I help?", push["message_id"])
        await ship(agent, chain, 0)
        printed = await asyncio.wait_for(process.stdout.readline(), 20)
        assert printed.decode().replace(PROMPT, "") == "Hello! How can I help?\n"
        process.stdin.close()
        rest, err = await asyncio.wait_for(process.communicate(), 20)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode == 0, err.decode()
    assert rest.decode().replace(PROMPT, "") == ""
    assert "Ctrl-D to leave" in err.decode()
