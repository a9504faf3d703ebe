"""`choir_control.agents`: one row per agent that has ever run, and the image it was started from.

Sessions reference their agent, so a row is created on the agent's first start. The image
record (`image_version` plus the manifest hashes in `config.image`) is what INIT_HELLO compares
the running container against to catch drift between the image and what choird built (§15.1).
"""

from __future__ import annotations

from typing import Any, Final

from choir.store.postgres.pool import Connection

IMAGE_KEY: Final = "image"
"""Key of `agents.config` holding the version info of the image the agent was last started with."""

_ENSURE: Final = """
INSERT INTO choir_control.agents (agent_id, name) VALUES ($1, $2)
ON CONFLICT (agent_id) DO NOTHING
"""

_RECORD_IMAGE: Final = """
UPDATE choir_control.agents
SET image_version = $2, config = config || jsonb_build_object($3::text, $4::jsonb)
WHERE agent_id = $1
"""

_CLEAR_IMAGE: Final = """
UPDATE choir_control.agents SET image_version = NULL, config = config - $2::text
WHERE agent_id = $1
"""

_IMAGE: Final = "SELECT config -> $2::text AS image FROM choir_control.agents WHERE agent_id = $1"


async def ensure_agent(conn: Connection, agent_id: str) -> None:
    """Create the agent's row if it has none (its name defaults to its id)."""
    await conn.execute(_ENSURE, agent_id, agent_id)


async def record_image(conn: Connection, agent_id: str, image: dict[str, Any] | None) -> None:
    """Remember the version info of the image `agent_id` now runs; None forgets it.

    `image` is the JSON form of `/choir/version.json` and must hold `image_version`.
    """
    if image is None:
        await conn.execute(_CLEAR_IMAGE, agent_id, IMAGE_KEY)
    else:
        await conn.execute(_RECORD_IMAGE, agent_id, image["image_version"], IMAGE_KEY, image)


async def image_of(conn: Connection, agent_id: str) -> dict[str, Any] | None:
    """The version info recorded by `record_image`, or None when none is."""
    image: dict[str, Any] | None = await conn.fetchval(_IMAGE, agent_id, IMAGE_KEY)
    return image
