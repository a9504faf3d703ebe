"""`session.messages`: a session's messages in order, as the agent browses them (`choir.memory.
query` mode `browse`, `memory.browse`): who said what, each tool call told in one sentence."""

from __future__ import annotations

from choir.daemon.operator.context import OperatorContext
from choir.errors import NotFoundError
from choir.protocol.operator.answers import SessionMessage
from choir.protocol.operator.answers import SessionMessages as SessionMessagesAnswer
from choir.protocol.operator.requests import SessionMessages as SessionMessagesRequest
from choir.store.sessions import get_session


async def session_messages(
    ctx: OperatorContext, request: SessionMessagesRequest
) -> SessionMessagesAnswer:
    """A page of a session's messages (any agent's, open or closed), as the agent browses it."""
    from choir.daemon.memory.tools.browse import browse_page

    async with ctx.pool.acquire() as conn:
        session = await get_session(conn, request.session_id)
    if session is None:
        raise NotFoundError(
            f"there is no session {request.session_id!r}; list them with choirctl session list"
        )
    page = await browse_page(
        ctx.pool,
        session.agent_id,
        request.session_id,
        after_rev=request.offset,
        limit=request.limit,
    )
    return SessionMessagesAnswer(
        session_id=request.session_id,
        agent_id=session.agent_id,
        messages=[
            SessionMessage(rev=line.rev, who=line.who, text=line.text, cut=line.cut)
            for line in page.lines
        ],
        next_offset=page.next_offset,
    )
