"""The config.json that `choirctl init` writes: the embedded defaults, runnable with no editing.

Embedded Postgres, the console gateway and DM, the scripted demo model, one workspace and the
default agent `agent-1` (DESIGN-NOTES, "Embedded defaults"). Every section of §6.3 is present,
empty where there is nothing to default, so the operator sees where things go.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from choir.config.tunables import Tunables
from choir.home import ChoirHome

DEFAULT_AGENT = "agent-1"
DEFAULT_WORKSPACE = "default"
DEMO_MODEL = "demo"
CONSOLE = "console"


def default_workspace(home: ChoirHome) -> Path:
    return home.workspaces / DEFAULT_WORKSPACE


def agent_entry(repo_url: str, defaults: Mapping[str, str]) -> dict[str, Any]:
    """An `agents.<id>` entry; every default key present, "" where unset (§17.8)."""
    keys = ("workspace", "llm", "voice_profile", "git_identity", "notion", "email", "dm")
    return {
        "repo": {"url": repo_url, "ref": "main"},
        "defaults": {key: defaults.get(key, "") for key in keys},
    }


def skeleton_config(home: ChoirHome, global_repo: Path, agent_repo: Path) -> dict[str, Any]:
    agent = {
        "repo": {"url": str(agent_repo), "ref": "main"},
        "defaults": {
            "workspace": DEFAULT_WORKSPACE,
            "llm": DEMO_MODEL,
            "git_identity": DEFAULT_AGENT,
            "dm": CONSOLE,
        },
    }
    return {
        "global_repo": {"url": str(global_repo), "ref": "main"},
        "workspaces": {DEFAULT_WORKSPACE: {"path": str(default_workspace(home))}},
        "models": {
            DEMO_MODEL: {
                "provider": "scripted",
                "model": "choir-demo",
                "endpoint": None,
                "temperature": None,
                "reasoning_effort": None,
                "secret": None,
                "label": "demo model (scripted, not a real LLM)",
            }
        },
        "tts": {},
        "voice_profiles": {},
        "git_identities": {
            DEFAULT_AGENT: {
                "name": f"choir {DEFAULT_AGENT}",
                "email": f"{DEFAULT_AGENT}@choir.local",
                "secret": None,
            }
        },
        "notion_integrations": {},
        "email_accounts": {},
        "search": {},
        "embedding": None,
        "gateways": {CONSOLE: {"type": "console"}},
        "dms": {CONSOLE: {"gateway": CONSOLE, "user_id": "operator", "admin": True}},
        "postgres": {"embedded": True},
        "agents": {DEFAULT_AGENT: agent},
        **Tunables().model_dump(mode="json"),
    }


def render(data: Mapping[str, Any]) -> str:
    """config.json text as choir writes it: two-space indent, key order kept, final newline."""
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"
