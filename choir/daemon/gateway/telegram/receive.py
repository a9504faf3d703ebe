"""A file a user sends lands in the agent's `.choirtmp/recv/` (§19.5).

Downloaded with `getFile` and the file URL (under the cloud Bot API's 20 MB: a larger file is
refused with a reply saying so, before any download), stored whole under a safe name of its
own (`files.stored_name`, `staging.store`), and announced to the agent as a message whose
attachment is that path. A download that may pass later (network, 5xx) raises: the poller
offers the update again, and a file already stored for it is not fetched twice.

Files stay in `recv/` after the agent got the message: §19.5 cleans them up "after the agent
acknowledges receipt", but the message is acknowledged (committed) before the agent has read
the file, so removing it then would take it away. The agent removes what it is done with;
`workspace reset` clears the rest.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

from telegram.error import BadRequest

from choir.daemon.gateway.telegram import staging
from choir.daemon.gateway.telegram.client import BotClient, FileTooBig
from choir.daemon.gateway.telegram.files import (
    DOWNLOAD_LIMIT,
    RECV,
    Incoming,
    attachment_text,
    stored_name,
    too_big_to_fetch,
)
from choir.logs import get_logger

log = get_logger("choird.telegram")


@dataclass(frozen=True)
class Received:
    """What the agent is told: the message text and the attachment's workspace path."""

    text: str
    path: str


async def receive(
    client: BotClient,
    update_id: int,
    file: Incoming,
    caption: str | None,
    workspace: Path,
) -> Received | str:
    """Fetch and store `file` for the agent; the agent's message, or what to tell the user."""
    if file.size is not None and file.size > DOWNLOAD_LIMIT:
        return too_big_to_fetch(file, file.size)
    name = stored_name(client.gateway, update_id, file.name)
    try:
        data = await client.fetch_file(file.file_id, DOWNLOAD_LIMIT)
    except FileTooBig as error:
        return too_big_to_fetch(file, error.size or file.size or DOWNLOAD_LIMIT + 1)
    except BadRequest as error:
        if "too big" in str(error).lower():  # what getFile answers over 20 MB
            return too_big_to_fetch(file, file.size or DOWNLOAD_LIMIT + 1)
        return _not_fetched(client, file, error)
    except ValueError as error:
        return _not_fetched(client, file, error)
    try:
        await asyncio.to_thread(staging.store, workspace, name, data)
    except OSError as error:
        log.error(
            "telegram file not stored in the workspace",
            fields={"gateway": client.gateway, "update_id": update_id,
                    "error": f"{type(error).__name__}: {error.strerror}"},
        )  # fmt: skip
        return (
            f"The {file.kind} could not be stored in the agent's workspace "
            f"({error.strerror}): the operator can check its .choirtmp/recv/ folder."
        )
    path = f"{RECV}/{name}"
    return Received(attachment_text(file, path, len(data), caption), path)


def _not_fetched(client: BotClient, file: Incoming, error: Exception) -> str:
    why = client.failure(error).why
    log.warning("telegram file not fetched", fields={"gateway": client.gateway, "error": why})
    return f"The {file.kind} could not be fetched from Telegram ({why}): send it again."
