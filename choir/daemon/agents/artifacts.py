"""PUT_ARTIFACT and FETCH_ARTIFACT (`choir.protocol.wire.artifacts`): the whole of previewed events.

An agent stores an artifact before the heartbeat whose event names it, and reads artifacts of its
own session back on a resume. Every artifact belongs to one session: a caller never reaches
another session's. The store keeps chunks in order and verifies the digest (`store.artifacts`).
"""

from __future__ import annotations

from choir.daemon.agents.refusals import RpcFault
from choir.daemon.sessions.state import SessionContext
from choir.errors import ConflictError
from choir.protocol import ErrorCode
from choir.protocol.wire.artifacts import (
    ARTIFACT_CHUNK_BYTES,
    FetchArtifactRequest,
    FetchArtifactResponse,
    PutArtifactRequest,
    PutArtifactResponse,
    decode_chunk,
    encode_chunk,
)
from choir.store.artifacts import ARTIFACT_MAX_BYTES, put_chunk, read_chunk
from choir.store.postgres.pool import Pool


class ArtifactVerbs:
    """The artifact verbs over the database."""

    def __init__(self, pool: Pool) -> None:
        self._pool = pool

    async def put_artifact(
        self, ctx: SessionContext, request: PutArtifactRequest
    ) -> PutArtifactResponse:
        if request.size > ARTIFACT_MAX_BYTES:
            raise RpcFault(
                ErrorCode.PAYLOAD_TOO_LARGE,
                f"artifact of {request.size} bytes exceeds the {ARTIFACT_MAX_BYTES}-byte limit",
            )
        data = decode_chunk(request.data)
        try:
            async with self._pool.acquire() as conn, conn.transaction():
                stored = await put_chunk(
                    conn, ctx.session_id, request.sha256, request.size, request.offset, data
                )
        except ConflictError as error:
            raise RpcFault(ErrorCode.CONFLICT, f"{error.message}; nothing was stored") from None
        return PutArtifactResponse(stored=stored.stored, complete=stored.complete)

    async def fetch_artifact(
        self, ctx: SessionContext, request: FetchArtifactRequest
    ) -> FetchArtifactResponse:
        async with self._pool.acquire() as conn:
            found = await read_chunk(
                conn, ctx.session_id, request.sha256, request.offset, ARTIFACT_CHUNK_BYTES
            )
        if found is None:
            raise RpcFault(
                ErrorCode.NOT_FOUND,
                f"session {ctx.session_id} holds no artifact {request.sha256}",
            )
        size, data = found
        if request.offset >= size:
            raise RpcFault(
                ErrorCode.INVALID_REQUEST, f"offset {request.offset} is past the artifact's end"
            )
        return FetchArtifactResponse(
            sha256=request.sha256, size=size, offset=request.offset, data=encode_chunk(data)
        )


__all__ = ["ArtifactVerbs"]
