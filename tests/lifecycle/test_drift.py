"""INIT_HELLO holds the agent to what choird recorded at start (§15.1): drift is refused.

The real path: the process runtime merges agent-1's `/choir` tree and choird records its
version.json on the session; then the tree changes under it — a skill edited in the global repo
and merged again, as a concurrent build would — before the real choir-agent says hello.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from choir.daemon.runtimes.process import ProcessRuntime
from choir.store.sessions import SessionStatus
from tests.harness.agent_logs import agent_log_text
from tests.harness.daemons import leased, poll_until, session_row, stored_events
from tests.lifecycle.conftest import Choird
from tests.lifecycle.support import commit_file

pytestmark = pytest.mark.slow


async def test_an_agent_whose_tree_changed_after_start_is_refused(choird: Choird) -> None:
    daemon, client = choird
    runtime, services = daemon.runtime, daemon.services
    assert isinstance(runtime, ProcessRuntime)
    assert services is not None
    config = services.stage.running.config
    artefact = await runtime.prepare("agent-1", config)
    started = await services.sessions.start("agent-1", {"dm": "console"}, image=artefact.version)
    skill = daemon.home.sources / "global" / "skills" / "skill-builder.json"
    edited = json.loads(skill.read_text()) | {"description": "Edited after the agent started."}
    commit_file(skill.parents[1], "skills/skill-builder.json", json.dumps(edited))
    runtime.materialize("agent-1", config)  # the same tree, merged again

    agent = await runtime.start(
        "agent-1",
        started,
        artefact,
        workspace=Path(config.workspaces["default"].path),
        socket=await daemon.open_agent_socket("agent-1"),
    )

    async def crashed() -> bool:
        return (await session_row(daemon, started.session_id)).status == SessionStatus.CRASHED

    await poll_until(crashed, within=15)
    log = agent_log_text(daemon.home, "agent-1")  # archived at the exit
    assert "image drift in agent-1: skill_manifest_hash" in log
    assert "choirctl agent update agent-1" in log
    await poll_until(lambda: runtime.running("agent-1") is None, within=10)  # it said why, exits
    assert agent.pid is not None
    assert await leased(daemon, started.session_id) == set()
    assert await stored_events(daemon, started.session_id) == []
    # a start merges the tree again and records it: the agent runs
    restarted = await client.agent_start("agent-1", {"dm": "console"})
    assert restarted.image.skill_manifest_hash != artefact.version.skill_manifest_hash
    await client.agent_stop("agent-1")
