"""`model.list|get|set` and `voice.list|get|set` (§17.1 Model switching, §21).

Names come from the running config. The scripted provider is choir's built-in demo model, not a
real LLM, and is marked `demo` wherever a model is shown (design notes, "Embedded defaults").
`get` shows what the agent's session is bound to — an override if one was set — and its default.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from choir.daemon.operator.agents.overrides import Role, override_binding
from choir.daemon.operator.context import OperatorContext
from choir.errors import NotFoundError
from choir.protocol.operator.answers import (
    AgentChoices,
    BindingSwitched,
    ModelList,
    ModelView,
    TtsView,
    VoiceList,
    VoiceProfileView,
)
from choir.protocol.operator.requests import AgentRef, ModelSet, NoArguments, VoiceSet
from choir.store.sessions import SessionStatus

DEMO_PROVIDER: Final = "scripted"


async def model_list(ctx: OperatorContext, _: NoArguments) -> ModelList:
    """Named LLM models and TTS providers."""
    config = ctx.config
    models = [
        ModelView(
            name=name,
            provider=model.provider,
            model=model.model,
            label=model.label,
            demo=model.provider == DEMO_PROVIDER,
            secret=model.secret,
        )
        for name, model in sorted(config.models.items())
    ]
    tts = [
        TtsView(name=name, provider=entry.provider, model_id=entry.model_id)
        for name, entry in sorted(config.tts.items())
    ]
    return ModelList(models=models, tts=tts)


async def model_get(ctx: OperatorContext, request: AgentRef) -> AgentChoices:
    """The agent's current LLM and voice profile, and its defaults."""
    data = await _current(ctx, request.agent_id)
    model = ctx.config.models.get(data["llm"] or "")
    return AgentChoices(**data, llm_demo=model is not None and model.provider == DEMO_PROVIDER)


async def model_set(ctx: OperatorContext, request: ModelSet) -> BindingSwitched:
    """Switch a running agent's LLM until its next start."""
    _require_name(ctx.config.models, request.llm, "model", "choirctl model list")
    return await _override(ctx, request.agent_id, "llm", request.llm, "--llm")


async def voice_list(ctx: OperatorContext, _: NoArguments) -> VoiceList:
    """Named voice profiles with their TTS provider."""
    profiles = [
        VoiceProfileView(
            name=name,
            tts=profile.tts,
            voice_id=profile.voice_id,
            output_format=profile.output_format,
        )
        for name, profile in sorted(ctx.config.voice_profiles.items())
    ]
    return VoiceList(voice_profiles=profiles)


async def voice_get(ctx: OperatorContext, request: AgentRef) -> AgentChoices:
    return AgentChoices(**await _current(ctx, request.agent_id))


async def voice_set(ctx: OperatorContext, request: VoiceSet) -> BindingSwitched:
    """Switch a running agent's voice profile until its next start."""
    profiles = ctx.config.voice_profiles
    _require_name(profiles, request.voice_profile, "voice profile", "choirctl voice list")
    return await _override(
        ctx, request.agent_id, "voice_profile", request.voice_profile, "--voice-profile"
    )


async def _current(ctx: OperatorContext, agent_id: str) -> dict[str, Any]:
    ctx.require_agent(agent_id)
    defaults = ctx.config.agents[agent_id].defaults
    row = await ctx.latest_session(agent_id)
    running = row is not None and row.status == SessionStatus.ACTIVE
    bound = row.resource_bindings if row is not None and running else {}
    llm = bound.get("llm", defaults.llm) or None
    voice = bound.get("voice_profile", defaults.voice_profile) or None
    return {
        "agent_id": agent_id,
        "running": running,
        "session_id": row.session_id if row is not None and running else None,
        "llm": llm,
        "llm_default": defaults.llm or None,
        "llm_overridden": running and llm != (defaults.llm or None),
        "voice_profile": voice,
        "voice_profile_default": defaults.voice_profile or None,
        "voice_profile_overridden": running and voice != (defaults.voice_profile or None),
    }


async def _override(
    ctx: OperatorContext, agent_id: str, role: Role, name: str, flag: str
) -> BindingSwitched:
    hint = (
        "a switch applies to a running agent until its next start; "
        f"to start it with this choice use choirctl agent start {agent_id} {flag} {name}"
    )
    session = await ctx.running_session(agent_id, hint=hint)
    return await override_binding(ctx, session, role, name)


def _require_name(entries: Mapping[str, object], name: str, noun: str, listing: str) -> None:
    if name not in entries:
        known = ", ".join(sorted(entries)) or "none configured"
        raise NotFoundError(f"no {noun} named {name!r} (known: {known}); see {listing}")
