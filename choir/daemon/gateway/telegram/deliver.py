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

It goes as a photo, voice message, video or document by its type (`files.send_method`; a
photo, voice or video that Telegram refuses goes again as a document) and, once Telegram has
it, is removed — unless the agent wrote it again meanwhile. A file over the upload limit, or
one that fails (a refusal, or `ATTEMPTS` failed tries) is reported to the user and kept; that
version of it is never tried again (writing it anew is a new try). A choird that stops
mid-upload leaves the file where it was: the next watcher sends it (once more, at worst).
"""

from __future__ import annotations

import asyncio
import contextlib
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
    _changed: asyncio.Event = field(default_factory=asyncio.Event)
    _stop: asyncio.Event = field(default_factory=asyncio.Event)

    async def run(self) -> None:
        watching = asyncio.get_running_loop().create_task(self._watch())
        try:
            while True:
                self._changed.clear()
                settling = await self._pass()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.settle_s if settling else RESCAN_S):
                        await self._changed.wait()
        finally:
            self._stop.set()
            watching.cancel()
            await asyncio.gather(watching, return_exceptions=True)

    async def _watch(self) -> None:
        from watchfiles import awatch  # imported when a DM's agent runs: choirctl stays light

        try:
            async for _ in awatch(
                self.to.workspace / SEND,
                watch_filter=None,
                debounce=400,
                step=50,
                stop_event=self._stop,
                recursive=False,
            ):
                self._changed.set()
        except Exception as error:  # the folder is gone or replaced: rescans carry on
            fields = {"session": self.session_id, "error": type(error).__name__}
            log.debug("send folder not watched", fields=fields)

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
    """A `SendFolder` for each running session bound to a Telegram DM."""

    def __init__(self, where: Where) -> None:
        self._where = where
        self._running: dict[str, asyncio.Task[None]] = {}

    def reconcile(self, active: list[SessionRow]) -> None:
        """Watch the folders of `active` sessions (those with a Telegram DM), no others."""
        live = {row.session_id for row in active}
        for session_id in [s for s in self._running if s not in live]:
            self._running.pop(session_id).cancel()
        for row in active:
            if row.session_id in self._running:
                continue
            to = self._where(row)
            if to is not None:
                folder = SendFolder(row.session_id, to)
                self._running[row.session_id] = asyncio.get_running_loop().create_task(
                    folder.run(), name=f"telegram-send-folder-{row.session_id}"
                )

    async def close(self) -> None:
        tasks = list(self._running.values())
        self._running.clear()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
