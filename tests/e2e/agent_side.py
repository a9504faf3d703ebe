"""What an agent sends, built from the agent's own pieces: its `CommitLog` and `ControlPlane`.

Shared by the in-process tests and `fake_agent` (a separate process), so it imports nothing of
choird: like choir-agent, it only speaks the protocol.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from choir.agent.kernel.commitlog import CommitLog
from choir.agent.replication.control_plane import ControlPlane
from choir.protocol import (
    GENESIS_HASH,
    PROTOCOL_VERSION,
    HeartbeatRequest,
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


def heartbeat(log: CommitLog, base_rev: int = 0, config_version: int = 1) -> HeartbeatRequest:
    """The revisions of a fresh `log` after `base_rev`, as the agent replicates them (§13.1)."""
    hash_prev = log.entry(base_rev).hash if base_rev else GENESIS_HASH
    return HeartbeatRequest.model_validate(
        {
            "base_rev": base_rev,
            "new_rev": log.head_rev,
            "patches": [entry.wire() for entry in log.since(base_rev)],
            "config_version": config_version,
            "hash_prev": hash_prev,
            "hash_new": log.head_hash,
            "timestamp": datetime.now(UTC),
        }
    )


async def open_control_plane(
    target: str | Path, session_id: str, lease_token: str, ca_file: Path | None = None
) -> ControlPlane:
    """The agent's typed client over the socket path or https URL `target`."""
    client = await connect(target, session_id=session_id, lease_token=lease_token, ca_file=ca_file)
    return ControlPlane(client)
