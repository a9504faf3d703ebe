"""`choir_control.gateway_offsets`: where each Telegram bot's long polling goes on (§19.2).

The Bot API hands out every update until a `getUpdates` with a later `offset` confirms it; the
next offset is stored here once the update is handled (a message durable in the inbox), so a
restarted choird neither loses nor repeats one. Keyed by gateway name and the bot's own id: a
gateway given another bot's token starts that bot's updates afresh.
"""

from __future__ import annotations

from typing import Final

from choir.store.postgres.pool import Connection

_LOAD: Final = """
SELECT next_update_id FROM choir_control.gateway_offsets WHERE gateway = $1 AND bot_id = $2
"""

_SAVE: Final = """
INSERT INTO choir_control.gateway_offsets (gateway, bot_id, next_update_id)
VALUES ($1, $2, $3)
ON CONFLICT (gateway, bot_id) DO UPDATE
SET next_update_id = GREATEST(gateway_offsets.next_update_id, EXCLUDED.next_update_id),
    updated_at = now()
"""


async def load_offset(conn: Connection, gateway: str, bot_id: int) -> int | None:
    """The next update id the bot has to handle (None: it never polled)."""
    value = await conn.fetchval(_LOAD, gateway, bot_id)
    return None if value is None else int(value)


async def save_offset(conn: Connection, gateway: str, bot_id: int, next_update_id: int) -> None:
    """Record that every update before `next_update_id` was handled (never moves back)."""
    await conn.execute(_SAVE, gateway, bot_id, next_update_id)
