"""FETCH_DYNAMIC_CONFIG (§16.1, §15.5, §17.7): the hot-reloadable part of config, as one blob.

An agent swaps it in whole. It holds how the agent does things — models, TTS, voice profiles,
search providers, tunables and budgets — plus the session's bindings, the agent's spend caps
(`spend_cap`) and the non-secret details of its bound git identity and email account. Secret
*names* appear (the agent fetches values with GET_SECRETS); what choird alone uses (Postgres,
gateways, embedding, other agents, workspace paths) does not.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from choir.config import ChoirConfig, Tunables
from choir.protocol import ResourceBindings

TUNABLES = frozenset(Tunables.model_fields)


def dynamic_config(
    config: ChoirConfig, bindings: ResourceBindings, agent_id: str | None = None
) -> dict[str, Any]:
    """The blob for a session of `agent_id` with `bindings` under `config`."""
    data = config.model_dump(mode="json", include=set(TUNABLES))
    data.update(
        models=_dump(config.models),
        tts=_dump(config.tts),
        voice_profiles=_dump(config.voice_profiles),
        search=_dump(config.search),
        bindings=bindings.model_dump(mode="json"),
    )
    bound: dict[str, Any] = {}
    if (identity := config.git_identities.get(bindings.git_identity or "")) is not None:
        bound["git_identity"] = identity.model_dump(mode="json")
    if (email := config.email_accounts.get(bindings.email or "")) is not None:
        bound["email"] = email.model_dump(mode="json")
    if (notion := config.notion_integrations.get(bindings.notion or "")) is not None:
        bound["notion"] = notion.model_dump(mode="json")
    data["bound"] = bound
    agent = config.agents.get(agent_id or "")
    if agent is not None and agent.spend_cap is not None:
        data["spend_cap"] = agent.spend_cap.model_dump(mode="json")
    return data


def _dump(entries: Mapping[str, BaseModel]) -> dict[str, Any]:
    return {name: entry.model_dump(mode="json") for name, entry in entries.items()}
