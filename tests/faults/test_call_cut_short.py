"""A choirctl command whose choird dies before answering says so in one line.

`agent restart` resumes the session and waits until the new agent runs its lanes; the agent is
held right after its INIT_HELLO (the `agent.after_hello` failpoint, which choird passes on to
the agents it starts) when choird is SIGKILLed. Before, choirctl printed only the transport's
words (`connection to socket … lost: [Errno 32] Broken pipe`), which named neither choird nor
what to do; the restart may or may not have taken effect, so the line says to look.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from choir.scripted import ScriptedModelServer
from choir.store.postgres.target import ConnectParams
from tests.faults.scene import (
    START,
    Scene,
    process_scene,
    run,
    script,  # noqa: F401 — the fixture
    start_choird,
)
from tests.faults.support import as_json, kill9
from tests.harness.waits import poll_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


async def test_a_command_whose_choird_dies_mid_call_names_it_and_the_next_step(
    root: Path, pg_params: ConnectParams, model: ScriptedModelServer
) -> None:
    async with process_scene(root, pg_params, model.url) as scene:
        await start_choird(scene)
        assert (await run(scene, *START)).returncode == 0
        assert scene.choird is not None
        kill9(scene.choird)  # agent-1 runs on, adopted by a choird that holds its next start
        await start_choird(scene, CHOIR_FAILPOINTS="agent.after_hello=sleep(60000)")
        await poll_until(lambda: _running(scene), within=30, every=0.2)
        log = scene.home.choird_log
        offset = len(log.read_bytes())

        restarting = asyncio.create_task(run(scene, "agent", "restart", "agent-1"))
        await poll_until(lambda: b"agent process started" in log.read_bytes()[offset:], 60)
        kill9(scene.choird)
        done = await restarting

        assert done.returncode == 6, done.stdout + done.stderr  # unavailable
        lines = done.stderr.splitlines()
        assert len(lines) == 1, done.stderr
        assert lines[0].startswith("error: choird stopped answering during agent.restart ("), lines
        assert lines[0].endswith(
            "whether it took effect is unknown; start choird again with `choir up`, "
            "then check with `choirctl status`"
        ), lines


async def _running(scene: Scene) -> bool:
    status = await run(scene, "agent", "status", "agent-1", "--json")
    return status.returncode == 0 and as_json(status)["state"] == "running"
