"""The callback data of an approval's [Approve] [Reject] (and [Approve + restart]) buttons
(§19.6), signed; pure.

Telegram hands a button's `callback_data` back verbatim to whoever presses it, and anyone who
can talk to the bot can send a callback query with data of their own making. So the data is
`<action><approval id>.<expiry>.<tag>`: the tag is an HMAC-SHA256 (cut to 128 bits) over the
action, the approval, the bot and the chat the message was sent to and the expiry, under a key
only choird holds. A callback counts only if its tag matches the bot and chat it came from (a
button pressed elsewhere — the same user's chat with another of choird's bots has the same chat
id —, or data made up, fails) and its expiry has not passed. That it is used once comes
from the approval itself: the first press decides it, and any later press (the same button
again, the other one, a replay) finds it no longer pending.

A live job card's [Cancel] and [Inject…] buttons (`cards`) are signed the same way, with
their own action codes and the card's id in the approval's place; single use is the card's
own business there (it ends with its job).

The whole fits Telegram's 64 bytes: `a` + `ap-0123456789ab` + `.` + expiry (base 36 seconds)
+ `.` + 22 base64url characters is 47.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from dataclasses import dataclass
from typing import Final, Literal

Action = Literal["approve", "reject", "restart", "cancel", "inject"]
"""`restart`: approve a config change that needs a restart, and restart what it needs."""

MAX_BYTES: Final = 64
"""Telegram's limit on a button's callback data."""
TAG_BYTES: Final = 16
KEY_BYTES: Final = 32

_CODES: Final[dict[Action, str]] = {
    "approve": "a", "reject": "r", "restart": "s", "cancel": "c", "inject": "i",
}  # fmt: skip
_ACTIONS: Final[dict[str, Action]] = {code: action for action, code in _CODES.items()}


@dataclass(frozen=True)
class Press:
    """A verified button press: what to do with which approval (or job card)."""

    action: Action
    approval_id: str


def sign(
    key: bytes, action: Action, approval_id: str, chat_id: int, expires_at: int, *, bot: str
) -> str:
    """The callback data of `action` on `approval_id`, valid from `chat_id` of `bot` (its
    gateway's name) until `expires_at` (Unix seconds). ValueError when it would not fit
    Telegram's limit."""
    if "." in approval_id or not approval_id:
        raise ValueError(f"approval id {approval_id!r} cannot ride a button")
    tag = _tag(key, action, approval_id, (bot, chat_id), expires_at)
    data = f"{_CODES[action]}{approval_id}.{_base36(expires_at)}.{tag}"
    if len(data.encode()) > MAX_BYTES:
        raise ValueError(f"approval id {approval_id!r} too long for a button")
    return data


def verify(key: bytes, data: str, chat_id: int, now: float, *, bot: str) -> Press | None:
    """What `data` pressed in `chat_id` of `bot` at `now` asks for; None when it is not
    choird's own for that chat (forged, altered, from another chat or bot) or has expired."""
    parts = data.split(".")
    if len(parts) != 3 or len(parts[0]) < 2:
        return None
    head, expiry, tag = parts
    action = _ACTIONS.get(head[0])
    try:
        expires_at = int(expiry, 36)
    except ValueError:
        return None
    if action is None or expiry != _base36(expires_at):
        return None
    approval_id = head[1:]
    expected = _tag(key, action, approval_id, (bot, chat_id), expires_at)
    if not hmac.compare_digest(expected.encode(), tag.encode()):
        return None
    if now >= expires_at:
        return None
    return Press(action, approval_id)


def _tag(
    key: bytes, action: Action, approval_id: str, chat: tuple[str, int], expires_at: int
) -> str:
    bot, chat_id = chat  # a gateway name is a config key: it holds no `|`
    message = f"{action}|{approval_id}|{bot}|{chat_id}|{expires_at}".encode()
    digest = hmac.new(key, message, hashlib.sha256).digest()[:TAG_BYTES]
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def _base36(number: int) -> str:
    if number < 0:
        raise ValueError("a negative expiry")
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        number, rest = divmod(number, 36)
        out = digits[rest] + out
        if number == 0:
            return out
