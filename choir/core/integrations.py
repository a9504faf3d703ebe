"""Which tools an agent's model may be offered, and why not: the same rules on both sides.

choir-agent withholds a tool from the model by them (`choir.agent.integrations`); choird shows
the operator the same answer in `agent status`, from the config and secrets it serves. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

WEB_SEARCH: Final = "choir.web.search"
NOTION_QUERY: Final = "choir.notion.query"
TTS_SPEAK: Final = "choir.tts.speak"
EMAIL_TOOLS: Final = ("choir.email.send", "choir.email.receive", "choir.email.check")
INTEGRATION_TOOLS: Final = frozenset({WEB_SEARCH, NOTION_QUERY, TTS_SPEAK, *EMAIL_TOOLS})
"""Tools that reach an outside service with the session's secrets (choir-agent runs them as lane
hooks); withheld while their service is not configured."""
WEB_BROWSE: Final = "choir.web.browse"
HOST_WORKER_TOOLS: Final = frozenset({WEB_BROWSE})
"""Host tools served by a choird worker that may be off or failed (the browser worker):
withheld unless the dynamic config's `host_unavailable` (from choird) leaves them out."""
REPO_CHANGE: Final = "choir.propose.repo_change"
AGENT_REPO: Final = "agent_repo"
"""The key of `withheld_tools`' data naming the repo the agent may clone to propose a repo
change (choir-agent adds it from `AGENT_REPO_ENV`, choird from its runtime); without it
`REPO_CHANGE` is withheld: the agent could not clone what it would propose."""
AGENT_REPO_ENV: Final = "CHOIR_AGENT_REPO"
"""The agent's repo path in the environment of an agent that may clone it (and of its tools)."""
AGENT_REF_ENV: Final = "CHOIR_AGENT_REF"
NO_REPO_TO_CLONE: Final = (
    "choird gave this agent no repo to clone: only an agent whose repo is a local path that "
    "neither another agent nor the global repo uses is given it (read-only)"
)
NOT_IN_THIS_VERSION: Final[frozenset[str]] = frozenset()
"""Seed manifests without an implementation yet, in choir-agent or in choird: never offered to a
lane (`open_kernel`'s `unavailable`), so no model is shown a tool that cannot run; a call by name
anyway answers `not_implemented` (built-ins) or `unknown_host_tool` (host tools)."""
NOT_BUILT: Final = "not in this version of choir"
BRAVE_ENDPOINT: Final = "https://api.search.brave.com/res/v1"
"""Brave Search API's base URL; `search.<name>.endpoint` overrides it."""
NOTION_ENDPOINT: Final = "https://api.notion.com"
"""Notion API's base URL (the client appends `/v1/`); `notion_integrations.<name>.endpoint`
overrides it."""


@dataclass(frozen=True, slots=True)
class SearchProvider:
    """Where searches go: one `search` entry of config.json."""

    name: str
    endpoint: str
    secret: str


def search_provider(search: Any) -> SearchProvider | None:
    """The provider among config's `search` entries (as JSON): the first by name, or None."""
    if not isinstance(search, Mapping):
        return None
    for name in sorted(search):
        entry = search[name]
        if not isinstance(entry, Mapping) or entry.get("provider", "brave") != "brave":
            continue
        secret = entry.get("secret")
        if isinstance(secret, str) and secret:
            endpoint = entry.get("endpoint") or BRAVE_ENDPOINT
            return SearchProvider(str(name), str(endpoint).rstrip("/"), secret)
    return None


@dataclass(frozen=True, slots=True)
class NotionAccess:
    """The Notion integration a session is bound to."""

    endpoint: str
    secret: str


def notion_access(bound: Any) -> NotionAccess | None:
    """The bound Notion integration among a session's bound resources (as JSON), or None."""
    entry = bound.get("notion") if isinstance(bound, Mapping) else None
    if not isinstance(entry, Mapping):
        return None
    secret = entry.get("secret")
    if not isinstance(secret, str) or not secret:
        return None
    endpoint = entry.get("endpoint") or NOTION_ENDPOINT
    return NotionAccess(str(endpoint).rstrip("/"), secret)


@dataclass(frozen=True, slots=True)
class VoiceAccess:
    """The voice a session speaks with: its bound voice profile and that profile's TTS provider."""

    profile: str
    endpoint: str
    """The provider's API root without `/v1` (what the ElevenLabs client takes)."""
    model_id: str
    secret: str
    voice_id: str
    output_format: str
    voice_settings: Mapping[str, Any]


def voice_access(data: Mapping[str, Any]) -> VoiceAccess | str:
    """The bound voice of the dynamic config `data` (its `bindings.voice_profile`, resolved
    through `voice_profiles` and `tts` as JSON), or why there is none."""
    bindings = data.get("bindings")
    name = bindings.get("voice_profile") if isinstance(bindings, Mapping) else None
    if not isinstance(name, str) or not name:
        return (
            "no voice profile is bound to the session: add one to voice_profiles in config.json "
            "and name it in the agent's defaults.voice_profile"
        )
    profiles = data.get("voice_profiles")
    profile = profiles.get(name) if isinstance(profiles, Mapping) else None
    providers = data.get("tts")
    tts = profile.get("tts") if isinstance(profile, Mapping) else None
    provider = providers.get(tts) if isinstance(providers, Mapping) and tts else None
    if not isinstance(profile, Mapping) or not isinstance(provider, Mapping):
        return f"voice profile {name!r} or its TTS provider is not in config.json"
    endpoint = str(provider.get("endpoint") or "https://api.elevenlabs.io/v1").rstrip("/")
    settings = profile.get("voice_settings")
    return VoiceAccess(
        profile=name,
        endpoint=endpoint.removesuffix("/v1"),
        model_id=str(provider.get("model_id", "")),
        secret=str(provider.get("secret", "")),
        voice_id=str(profile.get("voice_id", "")),
        output_format=str(profile.get("output_format") or "mp3_44100_128"),
        voice_settings=settings if isinstance(settings, Mapping) else {},
    )


Security = Literal["tls", "starttls", "none"]


@dataclass(frozen=True, slots=True)
class MailServer:
    host: str
    port: int
    security: Security


@dataclass(frozen=True, slots=True)
class EmailAccess:
    """The email account bound to a session."""

    smtp: MailServer
    imap: MailServer
    secret: str
    """The secret holding `username:password`."""
    address: str | None
    ca_cert: str | None


def email_access(bound: Any) -> EmailAccess | None:
    """The bound email account among a session's bound resources (as JSON), or None."""
    entry = bound.get("email") if isinstance(bound, Mapping) else None
    if not isinstance(entry, Mapping) or not isinstance(entry.get("secret"), str):
        return None
    smtp_port, imap_port = int(entry.get("smtp_port", 587)), int(entry.get("imap_port", 993))
    return EmailAccess(
        smtp=MailServer(
            str(entry.get("smtp_host", "")),
            smtp_port,
            entry.get("smtp_security") or ("tls" if smtp_port == 465 else "starttls"),
        ),
        imap=MailServer(
            str(entry.get("imap_host", "")),
            imap_port,
            entry.get("imap_security") or ("tls" if imap_port == 993 else "starttls"),
        ),
        secret=str(entry["secret"]),
        address=entry.get("address") or None,
        ca_cert=entry.get("ca_cert") or None,
    )


def withheld_tools(data: Mapping[str, Any], secret_names: frozenset[str]) -> dict[str, str]:
    """Each integration tool that cannot run under the dynamic config `data` (its `search`
    entries and the session's `bound` resources, as JSON) with the secrets named
    `secret_names`, with why."""
    withheld = {}
    provider = search_provider(data.get("search"))
    if provider is None:
        withheld[WEB_SEARCH] = (
            "no web search provider is configured: add search.<name> "
            '({"provider": "brave", "secret": "<secret>"}) to config.json'
        )
    elif provider.secret not in secret_names:
        withheld[WEB_SEARCH] = _unset(f"search.{provider.name}", provider.secret)
    notion = notion_access(data.get("bound"))
    if notion is None:
        withheld[NOTION_QUERY] = (
            "no Notion integration is bound to the session: add one to notion_integrations "
            "in config.json and name it in the agent's defaults.notion"
        )
    elif notion.secret not in secret_names:
        withheld[NOTION_QUERY] = _unset("the bound Notion integration", notion.secret)
    voice = voice_access(data)
    if isinstance(voice, str):
        withheld[TTS_SPEAK] = voice
    elif voice.secret not in secret_names:
        owner = f"voice profile {voice.profile!r}'s TTS provider"
        withheld[TTS_SPEAK] = _unset(owner, voice.secret)
    email = email_access(data.get("bound"))
    if email is None:
        reason = (
            "no email account is bound to the session: add one to email_accounts in "
            "config.json and name it in the agent's defaults.email"
        )
    elif email.secret not in secret_names:
        reason = _unset("the bound email account", email.secret)
    else:
        reason = ""
    if reason:
        withheld.update(dict.fromkeys(EMAIL_TOOLS, reason))
    withheld.update(_host_unavailable(data.get("host_unavailable")))
    if not data.get(AGENT_REPO):
        withheld[REPO_CHANGE] = str(data.get("agent_repo_unavailable") or NO_REPO_TO_CLONE)
    return withheld


def _host_unavailable(given: Any) -> dict[str, str]:
    """The worker-served host tools choird says cannot run (`host_unavailable`, from its
    `HostTools.unavailable`); all of them when it says nothing (a choird that predates it)."""
    if not isinstance(given, Mapping):
        return dict.fromkeys(sorted(HOST_WORKER_TOOLS), "choird did not say its workers run")
    return {name: str(given[name]) for name in sorted(HOST_WORKER_TOOLS) if name in given}


def _unset(what: str, secret: str) -> str:
    return f"{what}'s secret {secret!r} is not set: choirctl secret set {secret}"


def unavailable_tools(data: Mapping[str, Any], secret_names: frozenset[str]) -> dict[str, str]:
    """Every seed tool the model is not offered now, with why (for the operator)."""
    return {
        **dict.fromkeys(sorted(NOT_IN_THIS_VERSION), NOT_BUILT),
        **withheld_tools(data, secret_names),
    }
