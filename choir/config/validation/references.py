"""Names that point at other names: agent defaults, DMs, voice profiles, and secrets.

These checks read the decoded JSON rather than the validated model so they still run — and the
operator still hears about a misspelt model name — when some other part of the file is invalid.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

NOUNS = {
    "workspaces": "workspace",
    "models": "model",
    "tts": "TTS provider",
    "voice_profiles": "voice profile",
    "git_identities": "git identity",
    "notion_integrations": "Notion integration",
    "email_accounts": "email account",
    "gateways": "gateway",
    "dms": "DM",
}
"""What one entry of each named section is called in messages."""

AGENT_DEFAULTS = {
    "workspace": "workspaces",
    "llm": "models",
    "voice_profile": "voice_profiles",
    "git_identity": "git_identities",
    "notion": "notion_integrations",
    "email": "email_accounts",
    "dm": "dms",
}
"""Each agent default and the section it names (§6.4)."""

REQUIRED_DEFAULTS = ("workspace", "llm", "git_identity", "dm")
"""Defaults an agent cannot start without; empty ones are placeholders, reported as warnings."""


@dataclass(frozen=True)
class Reference:
    """A name at `path` that must be a key of the top-level `section`."""

    path: str
    section: str
    name: str


def _entries(data: Mapping[str, Any], section: str) -> Iterator[tuple[str, Mapping[str, Any]]]:
    value = data.get(section)
    if isinstance(value, Mapping):
        for name, entry in value.items():
            if isinstance(entry, Mapping):
                yield name, entry


def names_in(data: Mapping[str, Any], section: str) -> list[str]:
    """The sorted names defined in `section`."""
    value = data.get(section)
    return sorted(value) if isinstance(value, Mapping) else []


def references(data: Mapping[str, Any]) -> Iterator[Reference]:
    """Every non-empty reference in the file; wrong-typed values are left to the model check."""
    for agent_id, agent in _entries(data, "agents"):
        defaults = agent.get("defaults")
        if not isinstance(defaults, Mapping):
            continue
        for key, section in AGENT_DEFAULTS.items():
            name = defaults.get(key)
            if isinstance(name, str) and name:
                yield Reference(f"agents.{agent_id}.defaults.{key}", section, name)
    for dm, entry in _entries(data, "dms"):
        if isinstance(gateway := entry.get("gateway"), str) and gateway:
            yield Reference(f"dms.{dm}.gateway", "gateways", gateway)
    for profile, entry in _entries(data, "voice_profiles"):
        if isinstance(tts := entry.get("tts"), str) and tts:
            yield Reference(f"voice_profiles.{profile}.tts", "tts", tts)


def unknown_name(where: str, section: str, name: str, known: Collection[str]) -> str:
    """`<where>: unknown model 'sonet' (known: gpt4o, o3, sonnet)`."""
    listing = ", ".join(sorted(known)) or "none"
    return f"{where}: unknown {NOUNS[section]} {name!r} (known: {listing})"


def reference_problems(data: Mapping[str, Any]) -> list[str]:
    """One problem per reference to a name its section does not define."""
    return [
        unknown_name(ref.path, ref.section, ref.name, names_in(data, ref.section))
        for ref in references(data)
        if ref.name not in names_in(data, ref.section)
    ]


def placeholder_warnings(data: Mapping[str, Any]) -> list[str]:
    """Empty placeholders (§17.8) the operator must fill in before building or starting."""
    warnings = []
    global_repo = data.get("global_repo")
    if isinstance(global_repo, Mapping) and global_repo.get("url") == "":
        warnings.append("global_repo.url: not set (set it before building any agent)")
    for agent_id, agent in _entries(data, "agents"):
        repo = agent.get("repo")
        if isinstance(repo, Mapping) and repo.get("url") == "":
            where = f"agents.{agent_id}.repo.url"
            warnings.append(f"{where}: not set (set it before building the agent)")
        defaults = agent.get("defaults")
        if isinstance(defaults, Mapping):
            warnings.extend(
                f"agents.{agent_id}.defaults.{key}: not set (set it before starting the agent)"
                for key in REQUIRED_DEFAULTS
                if defaults.get(key) == ""
            )
    return warnings


def secret_references(data: Mapping[str, Any]) -> dict[str, list[str]]:
    """Secret name -> the JSON paths of the `secret` fields that name it, in file order."""
    found: dict[str, list[str]] = {}
    for path, name in _secret_fields(data, ()):
        found.setdefault(name, []).append(path)
    return found


def _secret_fields(value: Any, path: tuple[str, ...]) -> Iterator[tuple[str, str]]:
    if not isinstance(value, Mapping):
        return
    for key, child in value.items():
        if (key == "secret" or key.endswith("_secret")) and isinstance(child, str) and child:
            yield ".".join((*path, key)), child
        else:
            yield from _secret_fields(child, (*path, key))


def missing_secret_warnings(data: Mapping[str, Any], secret_names: Collection[str]) -> list[str]:
    """A warning per `secret` field naming a secret that secrets.json does not hold."""
    return [
        f"{path}: secret {name!r} is not set (choirctl secret set {name})"
        for path, name in _secret_fields(data, ())
        if name not in secret_names
    ]
