"""A summary tree grown as choird grows it, for the operator's tests (`knowledge expand` in
choirctl and the console): a session that compacted (an archive leaf) and closed with a summary
(its branch), then a later session that rolled the branch up (the root)."""

from __future__ import annotations

from dataclasses import dataclass

from choir.daemon.app import ChoirDaemon
from choir.protocol.log.events import MemoryRollup, SessionSummary, UserMsg
from tests.harness.daemons import pool_of
from tests.memory.close.support import run_session, wait_closed
from tests.memory.close.test_archive_faults import NAME, compacted

ROOT = "rollup/2026-11-27T14:40Z"


@dataclass(frozen=True)
class Tree:
    session_id: str
    """The session the archive and the summary came from."""
    root: str
    branch: str
    archive: str


async def grow_tree(daemon: ChoirDaemon, *, opening: str | None = None) -> Tree:
    """The tree; `opening`: the first user message of the archived window instead of the
    usual one."""
    await daemon.memory_started()
    summary = SessionSummary(summary="The user asked about the deploy script.")
    events = compacted()
    if opening is not None:
        assert isinstance(events[0], UserMsg)
        events[0] = UserMsg(text=opening)
    first = await run_session(daemon, [*events, summary])
    await wait_closed(pool_of(daemon), first)
    branch = f"summary/{first.removeprefix('s-')}"
    rollup = MemoryRollup(name=ROOT, text="Across sessions: the deploy script.", covers=[branch])
    later = await run_session(daemon, [UserMsg(text="hello"), rollup])
    await wait_closed(pool_of(daemon), later)
    return Tree(first, ROOT, branch, NAME)
