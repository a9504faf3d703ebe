"""Files an agent leaves in `.choirtmp/send/` go to its Telegram DM, then are removed (§19.5).

choird notices them with a watcher (watchfiles, inotify) on the `send/` folder of every
running session bound to a Telegram DM — the design notes' choice: a file is picked up
whether a tool, a skill or a shell command wrote it, and whether or not a reply names it.
`SendFolders.reconcile` starts and stops the watchers as sessions come and go (the gateway
calls it every `RECONCILE_S`); each folder is also rescanned now and then without an event, in
case a watch was lost (the agent replaced the directory).

A file is sent once it is finished, which is when all three hold:
- its name is final: hidden names and `.part`/`.tmp` ones are skipped — write under one, then
  rename (`choir.fs.write` does so for every write);
- no process holds it open for writing (a read lease is refused otherwise — `staging`);
- its inode, size and mtime have not changed for `SETTLE_S`.
One watcher thread serves every folder (watchfiles runs each watch in a thread of its own).

It goes as a photo, voice message, video or document by its type (`files.send_method`; a
photo, voice or video that Telegram refuses goes again as a document) and, once Telegram has
it, is removed — unless the agent wrote it again meanwhile. A file over the upload limit, or
one that fails (a refusal, or `ATTEMPTS` failed tries) is reported to the user and kept; that
version of it is not tried again in that session (writing it anew is a new try; the next
session tries once more). A choird or session that stops mid-upload leaves the file where it
was: the next session's watcher sends it (once more, at worst).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from choir.daemon.gateway.telegram import staging
from choir.daemon.gateway.telegram.client import BotClient
from choir.daemon.gateway.telegram.files import SEND, SendMethod, send_method, unsendable
from choir.daemon.gateway.telegram.outbox import ATTEMPTS, RETRY_S, Outbox
from choir.daemon.gateway.telegram.staging import Changed, Stamp
from choir.logs import get_logger
from choir.store.sessions import SessionRow

log = get_logger("choird.telegram")
logging.getLogger("watchfiles").setLevel(logging.WARNING)  # an INFO line per change seen

SETTLE_S: Final = 1.0
"""How long a file must stay unchanged before it is sent."""
RESCAN_S: Final = 30.0
"""A folder with nothing settling is rescanned this often even without an event."""
RECONCILE_S: Final = 2.0
"""How often the gateway matches the watchers to the running sessions."""


@dataclass(frozen=True)
class Destination:
    """Where one session's files go: its DM's chat on its bot, from its workspace."""

    client: BotClient
    outbox: Outbox
    chat_id: int
    workspace: Path


@dataclass
class _Seen:
    stamp: Stamp
    since: float


@dataclass
class SendFolder:
    """One session's `.choirtmp/send/`, watched and emptied into its chat."""

    session_id: str
    to: Destination
    settle_s: float = SETTLE_S
    _seen: dict[str, _Seen] = field(default_factory=dict)
    _given_up: dict[str, Stamp] = field(default_factory=dict)
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    """Set by the watcher when something in the folder changed."""

    @property
    def path(self) -> str:
        return str(self.to.workspace / SEND)

    async def run(self) -> None:
        while True:
            self.changed.clear()
            settling = await self._pass()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.settle_s if settling else RESCAN_S):
                    await self.changed.wait()

    async def _pass(self) -> bool:
        """Send every finished file; whether some file is still settling."""
        found = await asyncio.to_thread(staging.outgoing, self.to.workspace)
        self._seen = {name: seen for name, seen in self._seen.items() if name in found}
        self._given_up = {n: s for n, s in self._given_up.items() if found.get(n) == s}
        settling = False
        for name, stamp in sorted(found.items(), key=lambda item: item[1].mtime_ns):
            if self._given_up.get(name) == stamp:
                continue
            try:
                if await self._ready(name, stamp):
                    await self._send(name, stamp)
                else:
                    settling = True
            except (Changed, OSError):
                settling = True  # replaced or removed under us: looked at again
            except Exception:
                log.exception("file not sent", fields={"session": self.session_id})
                self._given_up[name] = stamp
        return settling

    async def _ready(self, name: str, stamp: Stamp) -> bool:
        now = time.monotonic()
        seen = self._seen.get(name)
        if seen is None or seen.stamp != stamp:
            self._seen[name] = _Seen(stamp, now)
            return False
        if now - seen.since < self.settle_s:
            return False
        if await asyncio.to_thread(staging.being_written, self.to.workspace, name):
            seen.since = now
            return False
        return True

    async def _send(self, name: str, stamp: Stamp) -> None:
        why = unsendable(stamp.size)
        if why is not None:
            self._give_up(name, stamp, f"{name} was not sent: {why}.", why)
            return
        data = await asyncio.to_thread(staging.read, self.to.workspace, name, stamp)
        method = send_method(name, stamp.size, data[: staging.HEAD_BYTES])
        error = await self._upload(method, name, data)
        if error is not None and method != "document":
            error = await self._upload("document", name, data)  # Telegram refused its kind
        if error is not None:
            self._give_up(name, stamp, f"{name} could not be sent ({error}).", error)
            return
        self._seen.pop(name, None)
        removed = await asyncio.to_thread(staging.remove, self.to.workspace, name, stamp)
        log.info(
            "file sent to telegram",
            fields={"session": self.session_id, "chat_id": self.to.chat_id, "as": method,
                    "bytes": stamp.size, "removed": removed},
        )  # fmt: skip

    async def _upload(self, method: SendMethod, name: str, data: bytes) -> str | None:
        """Send the file, retrying what may pass later; None once sent, else why not."""
        client = self.to.client
        for attempt in range(ATTEMPTS):
            try:
                await client.send_file(method, self.to.chat_id, name, data)
                return None
            except Exception as error:
                failure = client.failure(error)
                if failure.kind in ("permanent", "token") or attempt == ATTEMPTS - 1:
                    return failure.why
                await asyncio.sleep(failure.retry_after_s or RETRY_S[attempt])
        raise AssertionError("unreachable")

    def _give_up(self, name: str, stamp: Stamp, told: str, why: str) -> None:
        self._given_up[name] = stamp
        self._seen.pop(name, None)
        log.error(
            "file not sent to telegram; kept in .choirtmp/send",
            fields={"session": self.session_id, "chat_id": self.to.chat_id,
                    "bytes": stamp.size, "error": why},
        )  # fmt: skip
        self.to.outbox.send(
            self.to.chat_id,
            f"{told} It stays in the agent's .choirtmp/send/ folder; write it again to retry.",
        )


Where = Callable[[SessionRow], Destination | None]
"""Where a session's files go (None: its DM is no Telegram DM)."""


class SendFolders:
    """A `SendFolder` for each running session bound to a Telegram DM, and one watcher (one
    thread) over all their folders, started again whenever the set of folders changes."""

    def __init__(self, where: Where) -> None:
        self._where = where
        self._running: dict[str, tuple[SendFolder, asyncio.Task[None]]] = {}
        self._watcher: asyncio.Task[None] | None = None
        self._stop_watching = asyncio.Event()

    def reconcile(self, active: list[SessionRow]) -> None:
        """Watch the folders of `active` sessions (those with a Telegram DM), no others."""
        live = {row.session_id for row in active}
        before = set(self._running)
        for session_id in before - live:
            self._running.pop(session_id)[1].cancel()
        for row in active:
            if row.session_id not in self._running and (to := self._where(row)) is not None:
                folder = SendFolder(row.session_id, to)
                task = asyncio.get_running_loop().create_task(
                    folder.run(), name=f"telegram-send-folder-{row.session_id}"
                )
                self._running[row.session_id] = (folder, task)
        if set(self._running) != before or (self._running and self._watcher is None):
            self._rewatch()

    async def close(self) -> None:
        tasks = [task for _, task in self._running.values()]
        self._running.clear()
        self._rewatch()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def _rewatch(self) -> None:
        self._stop_watching.set()
        if self._watcher is not None:
            self._watcher.cancel()
            self._watcher = None
        folders = {folder.path: folder for folder, _ in self._running.values()}
        if folders:
            self._stop_watching = asyncio.Event()
            self._watcher = asyncio.get_running_loop().create_task(
                self._watch(folders, self._stop_watching), name="telegram-send-watcher"
            )

    async def _watch(self, folders: dict[str, SendFolder], stop: asyncio.Event) -> None:
        from watchfiles import awatch  # imported when a DM's agent runs: choirctl stays light

        paths = await asyncio.to_thread(lambda: [p for p in folders if os.path.isdir(p)])
        try:
            if paths:
                async for changes in awatch(
                    *paths, watch_filter=None, debounce=400, step=50, stop_event=stop,
                    recursive=False,
                ):  # fmt: skip
                    for _, changed in changes:
                        folder = folders.get(os.path.dirname(changed))
                        if folder is not None:
                            folder.changed.set()
        except Exception as error:  # a folder gone or replaced: the rescans carry on
            log.debug("send folders not watched", fields={"error": type(error).__name__})
        finally:
            if self._watcher is asyncio.current_task():
                self._watcher = None  # the next reconcile starts one again
