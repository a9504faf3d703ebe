"""config.json and secrets.json: models, validation, loading, and the setup commands' logic.

Import from here; the submodules are an implementation detail.
"""

from __future__ import annotations

from choir.config.load import (
    LoadedConfig,
    check_home,
    load_home,
    problems_header,
    read_secret_references,
)
from choir.config.model import AgentConfig, AgentDefaults, ChoirConfig, RepoRef
from choir.config.names import (
    AGENT_ID_PATTERN,
    NAME_PATTERN,
    SECRET_NAME_PATTERN,
    validate_agent_id,
    validate_secret_name,
)
from choir.config.resources import (
    ConsoleGateway,
    DmConfig,
    EmailAccountConfig,
    EmbeddedPostgres,
    EmbeddingConfig,
    ExternalPostgres,
    GitIdentityConfig,
    ModelConfig,
    NotionConfig,
    SearchConfig,
    TelegramGateway,
    TtsConfig,
    VoiceProfileConfig,
    VoiceSettings,
    WorkspaceConfig,
)
from choir.config.scaffolding.agent_init import AgentInitResult, init_agent
from choir.config.scaffolding.home_setup import InitResult, init_home
from choir.config.scaffolding.scaffold import seeds_dir
from choir.config.secret_store import SecretStore
from choir.config.tunables import Budgets, RpcLimits, Tunables
from choir.config.validation.references import secret_references
from choir.config.validation.validate import (
    ValidationReport,
    config_hash,
    validate_config_data,
    validate_config_text,
)

__all__ = [
    "AGENT_ID_PATTERN",
    "NAME_PATTERN",
    "SECRET_NAME_PATTERN",
    "AgentConfig",
    "AgentDefaults",
    "AgentInitResult",
    "Budgets",
    "ChoirConfig",
    "ConsoleGateway",
    "DmConfig",
    "EmailAccountConfig",
    "EmbeddedPostgres",
    "EmbeddingConfig",
    "ExternalPostgres",
    "GitIdentityConfig",
    "InitResult",
    "LoadedConfig",
    "ModelConfig",
    "NotionConfig",
    "RepoRef",
    "RpcLimits",
    "SearchConfig",
    "SecretStore",
    "TelegramGateway",
    "TtsConfig",
    "Tunables",
    "ValidationReport",
    "VoiceProfileConfig",
    "VoiceSettings",
    "WorkspaceConfig",
    "check_home",
    "config_hash",
    "init_agent",
    "init_home",
    "load_home",
    "problems_header",
    "read_secret_references",
    "secret_references",
    "seeds_dir",
    "validate_agent_id",
    "validate_config_data",
    "validate_config_text",
    "validate_secret_name",
]
