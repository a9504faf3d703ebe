"""The whole of config.json (§6.3) as one model: `ChoirConfig`.

Shape only: cross-references between sections, secrets and cross-field rules are checked by
`choir.config.validation.validate`, which reports every problem at once.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator

from choir.config.base import ConfigModel, NonEmpty
from choir.config.browser import BrowserConfig
from choir.config.container import ContainerConfig
from choir.config.llm import ModelConfig, SpendCap
from choir.config.memories import MemoryEntry, RelevanceConfig
from choir.config.metrics import MetricsConfig
from choir.config.names import AgentId, ResourceName
from choir.config.resources import (
    DmConfig,
    EmailAccountConfig,
    EmbeddedPostgres,
    EmbeddingConfig,
    GatewayConfig,
    GitIdentityConfig,
    NotionConfig,
    PostgresConfig,
    SearchConfig,
    TtsConfig,
    VoiceProfileConfig,
    WorkspaceConfig,
)
from choir.config.tunables import Tunables


class RepoRef(ConfigModel):
    """A git repository and the ref choird builds from (§6.5)."""

    url: str
    """Clone URL or local path; empty is a placeholder to fill in before building."""
    ref: NonEmpty = "main"
    """Branch, tag or commit to check out."""


class AgentDefaults(ConfigModel):
    """Resources an agent gets when started without overrides (§6.4, §17.1 start flags).

    Empty strings are placeholders left by `choirctl agent init`.
    """

    workspace: str
    """Workspace name (a key of `workspaces`); required to start."""
    llm: str
    """Model name (a key of `models`); required to start."""
    voice_profile: str | None = None
    """Voice profile name (a key of `voice_profiles`); optional."""
    git_identity: str
    """Git identity name (a key of `git_identities`); required to start."""
    notion: str | None = None
    """Notion integration name (a key of `notion_integrations`); optional."""
    email: str | None = None
    """Email account name (a key of `email_accounts`); optional."""
    dm: str
    """DM name (a key of `dms`); required to start from choirctl (§17.1)."""


class AgentConfig(ConfigModel):
    """One agent definition: its repo and default resources."""

    repo: RepoRef
    """The per-agent repo: Dockerfile, identity overrides, agent tools and skills."""
    defaults: AgentDefaults
    """Resources leased at start unless overridden."""
    spend_cap: SpendCap | None = None
    """Spend caps of this agent's LLM calls (calls of unknown cost do not count); hot-reloaded:
    a raised cap applies to the next call."""
    memories: list[MemoryEntry] | None = None
    """The memories it attaches, each with a role (`choir.config.memories`); absent: its own
    memories and every other agent's knowledge and app memory readable, as before classes."""


class ChoirConfig(Tunables):
    """config.json: every choird-managed resource, by name, plus the tunable defaults."""

    global_repo: RepoRef
    """The shared repo of tools, skills, identity and Dockerfile.base."""
    workspaces: dict[ResourceName, WorkspaceConfig] = Field(default_factory=dict)
    """Named workspaces (exclusive)."""
    models: dict[ResourceName, ModelConfig] = Field(default_factory=dict)
    """Named LLMs (shared)."""
    tts: dict[ResourceName, TtsConfig] = Field(default_factory=dict)
    """Named TTS providers (shared)."""
    voice_profiles: dict[ResourceName, VoiceProfileConfig] = Field(default_factory=dict)
    """Named voice profiles (shared)."""
    git_identities: dict[ResourceName, GitIdentityConfig] = Field(default_factory=dict)
    """Named git identities (exclusive)."""
    notion_integrations: dict[ResourceName, NotionConfig] = Field(default_factory=dict)
    """Named Notion integrations (exclusive)."""
    email_accounts: dict[ResourceName, EmailAccountConfig] = Field(default_factory=dict)
    """Named email accounts (exclusive or shared, per account)."""
    search: dict[ResourceName, SearchConfig] = Field(default_factory=dict)
    """Named web search providers (shared)."""
    embedding: EmbeddingConfig = Field(default_factory=EmbeddingConfig)
    """The embedding model of memory search; absent or null: the local model (§11.9)."""
    gateways: dict[ResourceName, GatewayConfig] = Field(default_factory=dict)
    """Named gateways: Telegram bots and the console."""
    dms: dict[ResourceName, DmConfig] = Field(default_factory=dict)
    """Named DM bindings (exclusive)."""
    postgres: PostgresConfig = Field(default_factory=EmbeddedPostgres)
    """The database: embedded (default) or an external server."""
    agents: dict[AgentId, AgentConfig] = Field(default_factory=dict)
    """Agent definitions by agent id."""
    container: ContainerConfig = Field(default_factory=ContainerConfig)
    """Where agents run (docker or process) and their containers' limits (§15.3)."""
    metrics: MetricsConfig = Field(default_factory=MetricsConfig)
    """choird's Prometheus endpoint (§22.1): off unless `metrics.listen` is set."""
    browser: BrowserConfig = Field(default_factory=BrowserConfig)
    """choird's browser worker (§18.2), which serves `choir.web.browse`: off unless enabled."""
    relevance: RelevanceConfig = Field(default_factory=RelevanceConfig)
    """Weights of knowledge relevance search (`choir.memory.query` mode `relevance`)."""

    @field_validator("embedding", mode="before")
    @classmethod
    def _null_embedding_is_local(cls, value: Any) -> Any:
        """`"embedding": null` (what `choirctl init` writes) means the default, the local model."""
        return {} if value is None else value
