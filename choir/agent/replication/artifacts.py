"""Artifacts to choird before the heartbeat that references them (§13.1, `protocol.artifacts`).

choird acknowledges an event whose preview names an artifact only once it holds that artifact
whole and verified, so the sender uploads it first: in chunks of `ARTIFACT_CHUNK_BYTES`, each call
answered with how much choird holds — a resend, a lost reply or a choird restart between chunks
only moves the offset. An artifact choird confirmed is never sent again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from choir.agent.kernel.commitlog import CommitLog, LogEntry
from choir.agent.replication.control_plane import ControlPlane
from choir.agent.replication.types import ReplicationFatal
from choir.protocol.wire.artifacts import ARTIFACT_CHUNK_BYTES, PutArtifactRequest, encode_chunk


class ArtifactUploader:
    """Uploads the artifacts of `log`'s previews through `control_plane`, each once."""

    def __init__(self, log: CommitLog, control_plane: ControlPlane, call_timeout_s: float) -> None:
        self._log = log
        self._cp = control_plane
        self._timeout = call_timeout_s
        self._stored: set[str] = set()
        """Artifacts choird confirmed whole."""

    def ready(self, entry: LogEntry) -> bool:
        """Whether choird can accept `entry`: no artifact, or one it already holds."""
        return entry.artifact is None or entry.artifact["sha256"] in self._stored

    def held(self, entries: Iterable[LogEntry]) -> None:
        """Mark the artifacts of `entries` as stored (choird acknowledged those revisions)."""
        self._stored.update(e.artifact["sha256"] for e in entries if e.artifact is not None)

    async def upload(self, entries: Iterable[LogEntry]) -> None:
        """Upload every artifact of `entries` choird does not hold yet; raises RpcError,
        TransportError or TimeoutError when a call fails (the caller retries later)."""
        for entry in entries:
            if not self.ready(entry):
                assert entry.artifact is not None
                await self._one(str(entry.artifact["sha256"]))

    async def _one(self, sha256: str) -> None:
        content = self._log.artifacts[sha256]
        offset = 0
        while True:
            chunk = content[offset : offset + ARTIFACT_CHUNK_BYTES]
            request = PutArtifactRequest(
                sha256=sha256, size=len(content), offset=offset, data=encode_chunk(chunk)
            )
            async with asyncio.timeout(self._timeout):
                reply = await self._cp.put_artifact(request)
            if reply.complete:
                self._stored.add(sha256)
                return
            if reply.stored >= len(content):  # a choird bug: it would only ever say so again
                raise ReplicationFatal(
                    f"choird holds all {len(content)} bytes of artifact {sha256} but does not "
                    "accept it"
                )
            offset = reply.stored


__all__ = ["ArtifactUploader"]
