"""Which named resources a session uses, and what that lets it lease and read (§6.4, §14.2).

Pure: everything is computed from the running `ChoirConfig`. Bindings come from the agent's
defaults with start-time overrides on top; the exclusive ones become leases, and the `secret`
fields of the bound resources are the only secrets the session may fetch.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from choir.config import ChoirConfig
from choir.config.validation.references import AGENT_DEFAULTS, NOUNS, REQUIRED_DEFAULTS
from choir.errors import NotFoundError, UsageError
from choir.protocol import ResourceBindings
from choir.store.leases import Resource

AGENT_KIND: Final = "agent"
"""Lease kind that makes an agent a singleton (invariant 11): its id is leased with the rest."""

KIND_NOUNS: Final = {
    "workspace": "workspace",
    "git_identity": "git identity",
    "notion": "Notion integration",
    "email": "email account",
    "dm": "DM",
}
"""Lease kinds (binding roles) and what messages call them."""


def resolve_bindings(
    config: ChoirConfig, agent_id: str, overrides: Mapping[str, str | None]
) -> ResourceBindings:
    """The agent's defaults with `overrides` (role -> name; None keeps the default) on top.

    Raises `NotFoundError` for an unknown agent and `UsageError` naming every bad role or name.
    """
    agent = config.agents.get(agent_id)
    if agent is None:
        raise NotFoundError(
            f"no agent named {agent_id!r} in config.json (known: {_known(config.agents)}); "
            "add it with choirctl agent init"
        )
    roles = {role.replace("-", "_"): name for role, name in overrides.items()}
    problems = [
        f"unknown resource {role!r} (known: {', '.join(AGENT_DEFAULTS)})"
        for role in roles
        if role not in AGENT_DEFAULTS
    ]
    chosen: dict[str, str | None] = {}
    for role, section in AGENT_DEFAULTS.items():
        override = roles.get(role)
        name = override if override is not None else getattr(agent.defaults, role)
        chosen[role] = name or None
        problems.extend(_check(config, agent_id, role, section, name, override is not None))
    if problems:
        raise UsageError(f"cannot start {agent_id}: " + "; ".join(problems))
    return ResourceBindings.model_validate(chosen)


def _check(
    config: ChoirConfig, agent_id: str, role: str, section: str, name: str | None, given: bool
) -> list[str]:
    flag = "--" + role.replace("_", "-")
    noun = NOUNS[section]
    if not name:
        if role not in REQUIRED_DEFAULTS:
            return []
        return [f"no {noun} chosen: pass {flag} or set agents.{agent_id}.defaults.{role}"]
    entries: Mapping[str, object] = getattr(config, section)
    if name in entries:
        return []
    where = flag if given else f"agents.{agent_id}.defaults.{role}"
    return [f"{where}: no {noun} named {name!r} (known: {_known(entries)})"]


def _known(entries: Mapping[str, object]) -> str:
    return ", ".join(sorted(entries)) or "none configured"


def exclusive_resources(
    config: ChoirConfig, agent_id: str, bindings: ResourceBindings
) -> list[Resource]:
    """What a session with `bindings` leases: the agent itself and its exclusive resources."""
    resources = [Resource(AGENT_KIND, agent_id), Resource("workspace", bindings.workspace)]
    if bindings.git_identity:
        resources.append(Resource("git_identity", bindings.git_identity))
    if bindings.notion:
        resources.append(Resource("notion", bindings.notion))
    email = config.email_accounts.get(bindings.email or "")
    if bindings.email and email is not None and email.sharing == "exclusive":
        resources.append(Resource("email", bindings.email))
    resources.append(Resource("dm", bindings.dm))
    return resources


def allowed_secrets(config: ChoirConfig, bindings: ResourceBindings) -> list[str]:
    """The secret names a session may fetch: the `secret` fields of its bound resources (and
    the git identity's `ssh_key_secret`).

    The search providers are shared and stateless (§6.4), so every one's key is allowed.
    Gateway, Postgres and embedding secrets are choird's own and never are.
    """
    names: list[str | None] = []
    if (model := config.models.get(bindings.llm)) is not None:
        names.append(model.secret)
    if (profile := config.voice_profiles.get(bindings.voice_profile or "")) is not None:
        tts = config.tts.get(profile.tts)
        names.append(tts.secret if tts is not None else None)
    if (identity := config.git_identities.get(bindings.git_identity or "")) is not None:
        names.extend((identity.secret, identity.ssh_key_secret))
    if (notion := config.notion_integrations.get(bindings.notion or "")) is not None:
        names.append(notion.secret)
    if (email := config.email_accounts.get(bindings.email or "")) is not None:
        names.append(email.secret)
    names.extend(search.secret for search in config.search.values())
    return sorted({name for name in names if name})
