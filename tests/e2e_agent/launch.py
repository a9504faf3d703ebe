"""Start the real `choir-agent` for agent-1 the way choird's process runtime would.

One place for every end-to-end test that needs a live agent: a session from choird's services
(a crashed one is resumed), agent-1's own socket or choird's HTTPS URL, a private HOME (the
agent writes its git config there, never to the test runner's home) and stderr kept in a log
file under the test's root.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from choir.daemon.app import ChoirDaemon
from tests.harness.daemons import Transport, agent_target
from tests.harness.processes import environment

CHOIR_AGENT = Path(sys.executable).parent / "choir-agent"


@dataclass(frozen=True)
class Launched:
    session_id: str
    process: asyncio.subprocess.Process


def agent_home(root: Path) -> Path:
    """A private HOME for a test's agent."""
    home = root / "agent-home"
    home.mkdir(exist_ok=True)
    return home


async def launch_agent(
    daemon: ChoirDaemon,
    root: Path,
    *,
    tree: Path,
    workspace: Path,
    log_name: str = "agent",
    transport: Transport = "uds",
    ca_file: Path | None = None,
) -> Launched:
    """agent-1's session started (or resumed) and its choir-agent process spawned.

    Over `uds` the agent gets its own socket; over `https` it gets choird's URL and verifies
    choird's certificate against `ca_file` (by default the daemon's own self-signed one).
    """
    assert daemon.services is not None
    started = await daemon.services.sessions.start("agent-1", {})
    env = environment(
        CHOIR_AGENT_ID="agent-1",
        CHOIR_SESSION_ID=started.session_id,
        CHOIR_LEASE_TOKEN=started.lease_token,
        HOME=str(agent_home(root)),
    )
    with (root / f"{log_name}.log").open("wb") as stderr:
        process = await asyncio.create_subprocess_exec(
            str(CHOIR_AGENT),
            *await _control_plane(daemon, transport, ca_file),
            f"--root={tree}",
            f"--workspace={workspace}",
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    return Launched(started.session_id, process)


async def _control_plane(
    daemon: ChoirDaemon, transport: Transport, ca_file: Path | None
) -> list[str]:
    """choir-agent's arguments naming how it reaches `daemon`."""
    target, trusted = await agent_target(daemon, transport)
    if transport == "uds":
        return ["--control-plane=uds", f"--socket={target}"]
    return ["--control-plane=http", f"--endpoint={target}", f"--ca-file={ca_file or trusted}"]
