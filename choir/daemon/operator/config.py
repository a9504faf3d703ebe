"""`config.load|diff|apply|show` and `secret.list|apply` (§16.3, §17.6, §17.1 Secrets).

Load stages and reports; apply publishes a new config_version and pushes `config_changed` to
every active session so agents fetch at once instead of at their next heartbeat. A load (or a
secret apply) that finds problems is an answer, not a refusal: `{staged: false, errors: [...]}`
carries every problem so the CLI prints them all (exit 3) and the TUI can list them.

`secret apply` re-reads secrets.json and pushes `secrets_refreshed` to each active session using
a secret that changed, naming only those (never values); sessions whose secrets are unchanged
have nothing to re-fetch.
"""

from __future__ import annotations

import asyncio
from typing import Any

from choir.config import ChoirConfig, problems_header
from choir.config.validation.references import secret_references
from choir.daemon.images.repo_refresh import refresh
from choir.daemon.operator.context import OperatorContext
from choir.daemon.sessions.bindings import allowed_secrets
from choir.daemon.staging.diff import ConfigChange, render_changes, secret_changes
from choir.daemon.staging.repo_diff import repo_changes
from choir.errors import ConfigError
from choir.logs import set_archive_threshold
from choir.protocol import ConfigChangedPush, ResourceBindings, SecretsRefreshedPush
from choir.protocol.operator.answers import (
    ChangeView,
    ConfigApplied,
    ConfigChanges,
    ConfigLoaded,
    ConfigShown,
    SecretList,
    SecretsApplied,
    SecretsPushed,
    SecretView,
)
from choir.protocol.operator.items import ConfigChanged, ConfigItem, SecretsChanged, SecretsItem
from choir.protocol.operator.requests import NoArguments
from choir.store.agents import image_of
from choir.store.sessions import SessionRow, active_sessions


def change_views(changes: list[ConfigChange]) -> ConfigChanges:
    """The changes as objects and as §17.6's aligned lines."""
    return ConfigChanges(
        changes=[
            ChangeView(op=c.op, source=c.source, path=c.path, scope=c.scope, action=c.action)
            for c in changes
        ],
        lines=render_changes(changes),
    )


async def config_load(ctx: OperatorContext, _: NoArguments) -> ConfigLoaded:
    """Validate $CHOIR_HOME and stage it; every problem is reported and nothing is staged.

    The repos are fetched and checked too (§17.6): a failed fetch is a warning, an invalid
    repo an error."""
    try:
        changes = await ctx.stage.load()
    except ConfigError as error:
        return ConfigLoaded(staged=False, **_problems(error))
    staged = ctx.stage.staged
    warnings = staged.warnings if staged is not None else []
    if staged is not None:
        refreshed = await asyncio.to_thread(refresh, ctx.home, staged.config)
        if refreshed.errors:
            ctx.stage.discard()
            return ConfigLoaded(staged=False, **_problems(ConfigError(refreshed.errors)))
        warnings = [*warnings, *refreshed.warnings]
        changes = [*changes, *await _repo_changes(ctx, staged.config)]
    hash_ = staged.config_hash if staged is not None else None
    return ConfigLoaded(
        staged=True, config_hash=hash_, warnings=warnings, **dict(change_views(changes))
    )


async def config_diff(ctx: OperatorContext, _: NoArguments) -> ConfigChanges:
    """Staged vs running, each change tagged hot-reload or restart-required; then what the
    staged repos change for each running agent (§17.6)."""
    changes = ctx.stage.diff()
    staged = ctx.stage.staged
    repo = await _repo_changes(ctx, staged.config) if staged is not None else []
    return change_views([*changes, *repo])


async def _repo_changes(ctx: OperatorContext, staged: ChoirConfig) -> list[ConfigChange]:
    """The tools, skills, identity files and commits that differ between what each running
    agent runs and the staged repos (`repo_diff`)."""
    running = {}
    async with ctx.pool.acquire() as conn:
        for row in await active_sessions(conn):
            image = await image_of(conn, row.agent_id)
            if image is not None:
                running[row.agent_id] = image
    return await asyncio.to_thread(repo_changes, ctx.home, staged, running)


async def config_apply(ctx: OperatorContext, _: NoArguments) -> ConfigApplied:
    """Publish the staged config under a new version and tell every active session."""
    await _added_agent_schemas(ctx)
    staged = ctx.stage.staged
    planned = ctx.stage.running.version + 1
    if staged is not None:  # else apply refuses it
        # recorded before anything answers: a choird killed after the answer comes back with it
        await save_version(ctx, planned, staged.config_hash)
    applied = ctx.stage.apply()
    if applied.version != planned:  # a `model set` bumped it meanwhile
        await save_version(ctx, applied.version, ctx.stage.running.loaded.config_hash)
    # a hot-reload tunable (staging/diff.py): choird's own log handler takes it now
    set_archive_threshold(ctx.config.log_archive_threshold_lines)
    sessions = await _active(ctx)
    for row in sessions:
        ctx.push(row.session_id, ConfigChangedPush(config_version=applied.version))
    changed = ConfigChanged(config_version=applied.version, reason="config apply")
    ctx.feed.publish(ConfigItem(data=changed))
    return ConfigApplied(
        config_version=applied.version,
        pushed=[row.session_id for row in sessions],
        **dict(change_views(applied.changes)),
        pending=render_changes(ctx.stage.pending()),
    )


async def config_show(ctx: OperatorContext, _: NoArguments) -> ConfigShown:
    """The running config (secret names only), its version and hash, and the applied changes
    that wait for a choird restart."""
    shown = ctx.stage.show()
    pending = change_views(shown.pop("pending"))
    return ConfigShown.model_validate(
        {**shown, "pending": pending.changes, "pending_lines": pending.lines}
    )


async def save_version(ctx: OperatorContext, version: int, config_hash: str) -> None:
    """Record the config_version choird is about to serve (`choir.store.operator_choices`)."""
    from choir.store.operator_choices import save_config_version

    async with ctx.pool.acquire() as conn:
        await save_config_version(conn, version, config_hash)


async def secret_list(ctx: OperatorContext, _: NoArguments) -> SecretList:
    """The secret names choird serves (never values) and the config fields naming each."""
    served = ctx.stage.secrets
    references = secret_references(ctx.config.model_dump(mode="json"))
    names = sorted(set(served.names()) | set(references))
    rows = [
        SecretView(name=name, set=name in served, referenced_by=references.get(name, []))
        for name in names
    ]
    return SecretList(secrets=rows, missing=[row.name for row in rows if not row.set])


async def secret_apply(ctx: OperatorContext, _: NoArguments) -> SecretsApplied:
    """Reload secrets.json and push `secrets_refreshed` to the sessions it affects."""
    before = ctx.stage.secrets
    try:
        after = await ctx.stage.reload_secrets()
    except ConfigError as error:
        return SecretsApplied(applied=False, header=None, errors=error.problems or [error.message])
    changed = [change.path for change in secret_changes(before, after)]
    pushed = []
    for row in await _active(ctx):
        bindings = ResourceBindings.model_validate(row.resource_bindings)
        used = sorted(set(allowed_secrets(ctx.config, bindings)) & set(changed))
        if used:
            ctx.push(row.session_id, SecretsRefreshedPush(secrets=used))
            pushed.append(
                SecretsPushed(session_id=row.session_id, agent_id=row.agent_id, secrets=used)
            )
    if changed:
        ctx.feed.publish(SecretsItem(data=SecretsChanged(changed=changed)))
    return SecretsApplied(applied=True, secrets=len(after), changed=changed, pushed=pushed)


async def _added_agent_schemas(ctx: OperatorContext) -> None:
    """Schemas and roles (§23.0) of the agents the staged config adds, made before it runs:
    `agent start` and the memory verbs need them at once, not after a choird restart. On a
    failure nothing is applied (a schema already made is harmless: the next apply reuses it)."""
    from choir.store.agent_schema import ensure_agent_schema

    staged = ctx.stage.staged
    if staged is None:
        return  # apply refuses it
    added = sorted(set(staged.config.agents) - set(ctx.config.agents))
    embedding = ctx.config.embedding  # a model change waits for the restart it needs
    async with ctx.pool.acquire() as conn:
        for agent_id in added:
            stored = await ensure_agent_schema(
                conn, agent_id, embedding.vector_dimensions, embedding.model_name
            )
            if ctx.vector_models is not None:
                ctx.vector_models.record(agent_id, stored)


def _problems(error: ConfigError) -> dict[str, Any]:
    problems = error.problems or [error.message]
    return {"header": problems_header(problems), "errors": problems}


async def _active(ctx: OperatorContext) -> list[SessionRow]:
    async with ctx.pool.acquire() as conn:
        return await active_sessions(conn)
