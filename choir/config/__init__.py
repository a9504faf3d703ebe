"""config.json and secrets.json: models, validation, loading, and the setup commands' logic.

Import from here; the submodules are an implementation detail.

Submodules load on first use (PEP 562): choir-agent reads a few of these models and never the
setup commands' logic (scaffolding, git repos, validation), which would cost its start-up ~0.1 s.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from choir.config.llm import ModelConfig
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

_HOMES = {
    "ModelConfig": "choir.config.llm",
    "LoadedConfig": "choir.config.load",
    "check_home": "choir.config.load",
    "load_home": "choir.config.load",
    "problems_header": "choir.config.load",
    "read_secret_references": "choir.config.load",
    "AgentConfig": "choir.config.model",
    "AgentDefaults": "choir.config.model",
    "ChoirConfig": "choir.config.model",
    "RepoRef": "choir.config.model",
    "AGENT_ID_PATTERN": "choir.config.names",
    "NAME_PATTERN": "choir.config.names",
    "SECRET_NAME_PATTERN": "choir.config.names",
    "validate_agent_id": "choir.config.names",
    "validate_secret_name": "choir.config.names",
    "ConsoleGateway": "choir.config.resources",
    "DmConfig": "choir.config.resources",
    "EmailAccountConfig": "choir.config.resources",
    "EmbeddedPostgres": "choir.config.resources",
    "EmbeddingConfig": "choir.config.resources",
    "ExternalPostgres": "choir.config.resources",
    "GitIdentityConfig": "choir.config.resources",
    "NotionConfig": "choir.config.resources",
    "SearchConfig": "choir.config.resources",
    "TelegramGateway": "choir.config.resources",
    "TtsConfig": "choir.config.resources",
    "VoiceProfileConfig": "choir.config.resources",
    "VoiceSettings": "choir.config.resources",
    "WorkspaceConfig": "choir.config.resources",
    "AgentInitResult": "choir.config.scaffolding.agent_init",
    "init_agent": "choir.config.scaffolding.agent_init",
    "InitResult": "choir.config.scaffolding.home_setup",
    "init_home": "choir.config.scaffolding.home_setup",
    "seeds_dir": "choir.config.scaffolding.scaffold",
    "SecretStore": "choir.config.secret_store",
    "Budgets": "choir.config.tunables",
    "RpcLimits": "choir.config.tunables",
    "Tunables": "choir.config.tunables",
    "secret_references": "choir.config.validation.references",
    "ValidationReport": "choir.config.validation.validate",
    "config_hash": "choir.config.validation.validate",
    "validate_config_data": "choir.config.validation.validate",
    "validate_config_text": "choir.config.validation.validate",
}
"""Public name -> the module defining it."""


def __getattr__(name: str) -> object:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


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
