"""Rules that span fields of a shape-valid config: each returns `<json.path>: <problem>` lines."""

from __future__ import annotations

from collections.abc import Callable

from choir.config.model import ChoirConfig
from choir.config.resources import TelegramGateway
from choir.config.validation.embedding import embedding_problems
from choir.core.memory.access import check_grants

SCRIPTED_PROVIDER = "scripted"
"""The built-in demo provider: replays a script, needs no endpoint or key."""


def crash_threshold(config: ChoirConfig) -> list[str]:
    """§13.1: a threshold under two heartbeats declares healthy agents crashed."""
    minimum = 2 * config.heartbeat_interval_ms
    if config.crash_detection_threshold_ms >= minimum:
        return []
    return [
        f"crash_detection_threshold_ms: must be at least 2 x heartbeat_interval_ms "
        f"({minimum}), got {config.crash_detection_threshold_ms}"
    ]


def model_endpoints(config: ChoirConfig) -> list[str]:
    return [
        f"models.{name}.endpoint: required for provider {model.provider!r} "
        f"(only {SCRIPTED_PROVIDER!r} needs none)"
        for name, model in config.models.items()
        if model.endpoint is None and model.provider != SCRIPTED_PROVIDER
    ]


def rpc_limits(config: ChoirConfig) -> list[str]:
    rpc = config.rpc
    if rpc.max_payload_bytes <= rpc.max_frame_bytes:
        return []
    return [
        f"rpc.max_payload_bytes: must not exceed rpc.max_frame_bytes ({rpc.max_frame_bytes}), "
        f"got {rpc.max_payload_bytes}"
    ]


def distinct_dms(config: ChoirConfig) -> list[str]:
    """Two DMs for the same user on the same bot would make message routing ambiguous."""
    seen: dict[tuple[str, str], str] = {}
    problems = []
    for name, dm in config.dms.items():
        first = seen.setdefault((dm.gateway, dm.user_id), name)
        if first != name:
            problems.append(f"dms.{name}: same gateway and user_id as dms.{first}")
    return problems


def telegram_dms(config: ChoirConfig) -> list[str]:
    """Telegram user ids are numbers; anything else can never match an incoming message."""
    return [
        f"dms.{name}.user_id: must be a numeric Telegram user id, got {dm.user_id!r}"
        for name, dm in config.dms.items()
        if isinstance(config.gateways.get(dm.gateway), TelegramGateway) and not dm.user_id.isdigit()
    ]


def admin_approvals(config: ChoirConfig) -> list[str]:
    """Every agent's approvals are for a DM that may decide them: an admin DM."""
    return [
        f'dms.{name}.approvals: "all" is for admin DMs only; set "admin": true on dms.{name} '
        'or use "approvals": "bound"'
        for name, dm in config.dms.items()
        if dm.approvals == "all" and not dm.admin
    ]


def pinned_ssh_hosts(config: ChoirConfig) -> list[str]:
    """§14.4: the agent's ssh checks host keys strictly, so a key with no pinned host could
    never be used; say so now rather than at the first failed fetch."""
    return [
        f"git_identities.{name}.ssh_known_hosts: empty, but ssh_key_secret is set: pin each "
        "SSH server's host key (the lines `ssh-keyscan -p PORT HOST` prints)"
        for name, identity in config.git_identities.items()
        if identity.ssh_key_secret and not identity.ssh_known_hosts
    ]


def memory_grants(config: ChoirConfig) -> list[str]:
    """Each agent's `memories` entries name known agents and roles their class allows."""
    agents = sorted(config.agents)
    return [
        problem
        for name, agent in config.agents.items()
        if agent.memories is not None
        for problem in check_grants(name, [m.grant(name) for m in agent.memories], agents)
    ]


RULES: tuple[Callable[[ChoirConfig], list[str]], ...] = (
    crash_threshold,
    model_endpoints,
    rpc_limits,
    distinct_dms,
    telegram_dms,
    admin_approvals,
    embedding_problems,
    pinned_ssh_hosts,
    memory_grants,
)


def rule_problems(config: ChoirConfig) -> list[str]:
    return [problem for rule in RULES for problem in rule(config)]
