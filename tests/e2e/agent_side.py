"""What an agent sends, built from the agent's own pieces: its `CommitLog` and `ControlPlane`.

Shared by the in-process tests and `fake_agent` (a separate process), so it imports nothing of
choird: like choir-agent, it only speaks the protocol.
"""

from __future__ import annotations

from pathlib import Path

from choir.agent.kernel.commitlog import CommitLog, now_ts
from choir.agent.replication.control_plane import ControlPlane
from choir.agent.replication.outgoing import OutgoingHeartbeat
from choir.agent.replication.policy import heartbeat_of
from choir.protocol import (
    GENESIS_HASH,
    PROTOCOL_VERSION,
    InitHelloRequest,
    UserMsg,
)
from choir.transport import connect

IMAGE_VERSION = "e2e0001"
TOOL_MANIFEST_HASH = "a" * 64
SKILL_MANIFEST_HASH = "b" * 64


def hello(agent_id: str, session_id: str) -> InitHelloRequest:
    """INIT_HELLO from an image choird did not pin (sessions started without one accept it)."""
    return InitHelloRequest(
        protocol_version=PROTOCOL_VERSION,
        agent_id=agent_id,
        session_id=session_id,
        image_version=IMAGE_VERSION,
        tool_manifest_hash=TOOL_MANIFEST_HASH,
        skill_manifest_hash=SKILL_MANIFEST_HASH,
    )


def commit_messages(log: CommitLog, count: int, text: str = "hello") -> None:
    """Commit `count` user messages on the edge lane."""
    for _ in range(count):
        log.commit("edge", UserMsg(text=f"{text} {log.head_rev + 1}"))


def heartbeat(log: CommitLog, base_rev: int = 0, config_version: int = 1) -> OutgoingHeartbeat:
    """The revisions of a fresh `log` after `base_rev`, as the agent replicates them (§13.1)."""
    return heartbeat_of(
        log.since(base_rev),
        base_rev=base_rev,
        hash_prev=log.entry(base_rev).hash if base_rev else GENESIS_HASH,
        config_version=config_version,
        timestamp=now_ts(),
    )


async def open_control_plane(
    target: str | Path, session_id: str, lease_token: str, ca_file: Path | None = None
) -> ControlPlane:
    """The agent's typed client over the socket path or https URL `target`."""
    client = await connect(target, session_id=session_id, lease_token=lease_token, ca_file=ca_file)
    return ControlPlane(client)
