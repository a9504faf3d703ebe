"""What `gateway.status` shows of one Telegram bot: a read-only snapshot, taken when asked.

It comes from the bot's poller (state, last poll and update, last failure) and its outbox
(queued and failed sends). Free of python-telegram-bot, so the operator API reads it without
loading the library; never a token or a message's text (errors are the client's token-free
lines).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Final

RUNNING: Final = "running"
"""A bot that polls: what `status` and the console's header count as up."""
NO_TOKEN: Final = "no_token"
"""A bot whose token secret is not set: never started."""


@dataclass(frozen=True)
class BotStatus:
    """One bot as `choirctl gateway status` shows it."""

    state: str
    """`running` (polling), `connecting`, `backing_off` (the Bot API unreachable: retried),
    `invalid_token` (rejected at start or revoked since: the bot stopped, choird runs on),
    `no_token` (its secret is not set) or `stopped` (choird is stopping)."""
    since: datetime | None = None
    """When it entered that state."""
    username: str | None = None
    """The bot's @username, once getMe answered."""
    last_poll_at: datetime | None = None
    last_update_at: datetime | None = None
    queued: int = 0
    """Messages waiting to be sent (or being sent)."""
    failed: int = 0
    """Messages given up since choird started."""
    last_error: str | None = None
    """The latest failure, of polling or of a send (kept after the bot recovered)."""
    last_error_at: datetime | None = None


def latest(*errors: tuple[str, datetime] | None) -> tuple[str | None, datetime | None]:
    """The most recent of `errors` (each a why and when), or (None, None)."""
    known = [error for error in errors if error is not None]
    if not known:
        return None, None
    return max(known, key=lambda error: error[1])
