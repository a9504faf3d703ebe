"""Transient per-session overrides: `model set` and `voice set` (§17.1 Model switching).

An override rebinds one role (`llm`, `voice_profile`) of an agent's active session: the session
row and choird's memory both get the new bindings, so FETCH_DYNAMIC_CONFIG and GET_SECRETS serve
the new model (and its key) from the next call, also after a choird restart. It is transient
because every agent start resolves bindings from the defaults again (§17.1: "on agent restart,
the agent reverts to its defaults").

Agents refetch config only when `config_version` moves (§16.3), so an override publishes a new
version and pushes `config_changed` to the session; other agents fetch an identical blob once.
The new bindings and the new version are both in Postgres before the answer
(`choir.store.operator_choices`), so a choird killed right after it changes neither.
"""

from __future__ import annotations

from typing import Any, Literal

from choir.daemon.operator.context import OperatorContext
from choir.daemon.staging.stage import ConfigStage
from choir.errors import ConflictError
from choir.protocol import ConfigChangedPush
from choir.protocol.operator.answers import BindingSwitched
from choir.protocol.operator.items import ConfigChanged, ConfigItem
from choir.store.operator_choices import save_config_version
from choir.store.postgres.pool import Connection
from choir.store.sessions import SessionRow

Role = Literal["llm", "voice_profile"]


async def override_binding(
    ctx: OperatorContext, session: SessionRow, role: Role, name: str
) -> BindingSwitched:
    """Bind `role` of the active `session` to `name`, publish, and tell the agent."""
    live = await ctx.sessions.live(session.session_id)
    previous = getattr(live.bindings, role)
    bindings = live.bindings.model_copy(update={role: name})
    planned = ctx.stage.running.version + 1
    config_hash = ctx.stage.running.loaded.config_hash
    async with ctx.pool.acquire() as conn, conn.transaction():  # both survive, or neither
        stored = await _store_bindings(conn, session.session_id, bindings.model_dump(mode="json"))
        if stored:
            await save_config_version(conn, planned, config_hash)
    if not stored:
        raise ConflictError(
            f"session {session.session_id} ended meanwhile: {session.agent_id} is not running"
        )
    live.bindings = bindings
    version = publish_version(ctx, f"{session.agent_id}: {role} set to {name}")
    if version != planned:  # another bump came in meanwhile: record where it ended
        async with ctx.pool.acquire() as conn:
            await save_config_version(conn, version, config_hash)
    ctx.push(session.session_id, ConfigChangedPush(config_version=version))
    return BindingSwitched(
        agent_id=session.agent_id,
        session_id=session.session_id,
        role=role,
        name=name,
        previous=previous,
        config_version=version,
    )


def publish_version(ctx: OperatorContext, reason: str) -> int:
    """A new config_version for the same running config; told to the live feed."""
    version = bump_config_version(ctx.stage)
    ctx.feed.publish(ConfigItem(data=ConfigChanged(config_version=version, reason=reason)))
    return version


def bump_config_version(stage: ConfigStage) -> int:
    """Serve the running config under the next version, so heartbeats make agents refetch."""
    return stage.bump()


async def _store_bindings(conn: Connection, session_id: str, bindings: dict[str, Any]) -> bool:
    result = await conn.execute(
        "UPDATE choir_control.sessions SET resource_bindings = $2 "
        "WHERE session_id = $1 AND status = 'active'",
        session_id,
        bindings,
    )
    return str(result).rsplit(" ", 1)[-1] != "0"
