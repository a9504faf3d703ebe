"""The rest of a resume's handover (§13.2): tail pages past INIT_HELLO's, and the artifacts
recovery needs (`choir.protocol.wire.artifacts`).

INIT_HELLO carries the snapshot and as much of the tail as fits in its answer; the rest comes a
page at a time (FETCH_EVENTS), each bounded by bytes, so a session holds any number of large
events and still resumes. Of the previews in the tail, recovery acts on the content of two kinds
— a model output's calls (a core job re-proposes them after a crash) and a core job's briefing
(it is re-created from it) — so their artifacts are read back too, in chunks, and checked against
their digest. Every other preview stays a preview: the prompt shows previews anyway.
"""

from __future__ import annotations

import hashlib
from typing import Final

from choir.agent.replication.control_plane import ControlPlane
from choir.errors import ChoirError
from choir.protocol import CommittedEvent, InitHelloResponse
from choir.protocol.log.committed import ArtifactRef
from choir.protocol.wire.artifacts import (
    FetchArtifactRequest,
    FetchEventsRequest,
    decode_chunk,
)

CONTENT_KINDS: Final = frozenset({"model_output", "core_started"})
"""Event kinds whose whole content recovery acts on (the `Ledger` reads it)."""


class HandoverError(ChoirError):
    """choird's handover cannot be completed: the session cannot resume from it."""


async def complete_handover(
    control_plane: ControlPlane, answer: InitHelloResponse
) -> tuple[InitHelloResponse, dict[str, bytes]]:
    """`answer` with its whole tail, and the artifacts of its CONTENT_KINDS previews by sha256."""
    tail = list(answer.tail_events)
    complete = answer.tail_complete
    while not complete:
        after = tail[-1].rev if tail else (answer.snapshot.rev if answer.snapshot else 0)
        page = await control_plane.fetch_events(FetchEventsRequest(after_rev=after))
        if not page.events and not page.complete:
            raise HandoverError(f"choird sent an empty page of the tail after rev {after}")
        tail.extend(page.events)
        complete = page.complete
    artifacts: dict[str, bytes] = {}
    for event in tail:
        if event.artifact is not None and _needed(event):
            artifacts[event.artifact.sha256] = await fetch_artifact(control_plane, event.artifact)
    whole = answer.model_copy(update={"tail_events": tail, "tail_complete": True})
    return whole, artifacts


def _needed(event: CommittedEvent) -> bool:
    return event.event.kind in CONTENT_KINDS


async def fetch_artifact(control_plane: ControlPlane, ref: ArtifactRef) -> bytes:
    """The artifact `ref` names, read in chunks and checked against its digest and size."""
    content = bytearray()
    while len(content) < ref.size:
        chunk = await control_plane.fetch_artifact(
            FetchArtifactRequest(sha256=ref.sha256, offset=len(content))
        )
        data = decode_chunk(chunk.data)
        if not data or chunk.offset != len(content):
            raise HandoverError(f"choird sent a broken chunk of artifact {ref.sha256}")
        content += data
    if len(content) != ref.size or hashlib.sha256(content).hexdigest() != ref.sha256:
        raise HandoverError(f"artifact {ref.sha256} does not match its digest")
    return bytes(content)


__all__ = ["CONTENT_KINDS", "HandoverError", "complete_handover", "fetch_artifact"]
