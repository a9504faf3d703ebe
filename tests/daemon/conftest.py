"""A real choird control plane per test: embedded Postgres, a `choirctl init` home, services.

The home is the one `choirctl init` writes, plus a second agent and one of every resource kind,
so every exclusive lease and every secret scope can be exercised.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from choir import failpoints
from choir.config import SecretStore, load_home
from choir.daemon.agents.services import AgentServices
from choir.daemon.staging.stage import ConfigStage
from choir.home import ChoirHome
from choir.store.postgres.ddl import apply_control_schema
from choir.store.postgres.pool import Pool, open_pool
from choir.store.postgres.target import ConnectParams
from tests.harness.homes import initialized, short_root

SECRETS = {
    "openrouter-key": "sk-or-1",
    "elevenlabs-key": "el-1",
    "git-token-2": "ghp-2",
    "notion-key": "ntn-1",
    "work-mail": "mail-1",
    "news-mail": "mail-2",
    "brave-key": "brave-1",
    "telegram-token": "tg-1",
}


class Clock:
    """A settable UTC clock for sessions and approvals."""

    def __init__(self) -> None:
        self.now = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, ms: int) -> None:
        self.now += timedelta(milliseconds=ms)


def extend_config(data: dict[str, Any], root: Path) -> None:
    """Add agent-2 and one resource of every kind to a skeleton config."""
    data["workspaces"]["other"] = {"path": str(root / "ws-other")}
    data["models"]["sonnet"] = {
        "provider": "openrouter",
        "model": "anthropic/claude-sonnet-4",
        "endpoint": "https://openrouter.ai/api/v1",
        "secret": "openrouter-key",
    }
    data["tts"]["eleven"] = {"model_id": "eleven_multilingual_v2", "secret": "elevenlabs-key"}
    data["voice_profiles"]["calm"] = {"tts": "eleven", "voice_id": "voice-1"}
    data["git_identities"]["agent-2"] = {
        "name": "choir agent-2",
        "email": "agent-2@choir.local",
        "secret": "git-token-2",
    }
    data["notion_integrations"]["personal"] = {"secret": "notion-key"}
    mail = {"smtp_host": "smtp.example.org", "imap_host": "imap.example.org"}
    data["email_accounts"]["work"] = {**mail, "secret": "work-mail"}
    data["email_accounts"]["news"] = {**mail, "sharing": "shared", "secret": "news-mail"}
    data["search"]["brave"] = {"secret": "brave-key"}
    data["gateways"]["bot"] = {"type": "telegram", "secret": "telegram-token"}
    data["dms"]["ops"] = {"gateway": "console", "user_id": "ops"}
    data["agents"]["agent-2"] = {
        "repo": own_repo(data["agents"]["agent-1"]["repo"], root / "repo-agent-2"),
        "defaults": {
            "workspace": "other",
            "llm": "sonnet",
            "voice_profile": "calm",
            "git_identity": "agent-2",
            "notion": "personal",
            "email": "work",
            "dm": "ops",
        },
    }


def own_repo(repo: dict[str, str], path: Path) -> dict[str, str]:
    """A clone of `repo` at `path`: a repo agent-2 does not share (a proposal to a shared repo
    is refused)."""
    if not path.exists():
        subprocess.run(["git", "clone", "-q", repo["url"], str(path)], check=True)
    return {**repo, "url": str(path)}


def write_config(home: ChoirHome, data: dict[str, Any]) -> None:
    home.config_file.write_text(json.dumps(data, indent=2) + "\n")


def read_config(home: ChoirHome) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(home.config_file.read_text())
    return data


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """The test's own directory under /tmp: agent socket paths under pytest's tmp_path (which
    pytest-xdist lengthens by a `popen-gwN/`) pass the 107-byte limit of Unix sockets."""
    with short_root("cd-") as root:
        yield root


def daemon_home(root: Path, name: str = "home") -> ChoirHome:
    """`choirctl init`'s home at `root/name` with agent-2, one resource of every kind and their
    secrets."""
    home = initialized(ChoirHome(root / name))
    data = read_config(home)
    extend_config(data, root)
    write_config(home, data)
    store = SecretStore.empty()
    for secret, value in SECRETS.items():
        store = store.with_secret(secret, value)
    store.save(home.secrets_file)
    return home


@pytest.fixture
def home(short_tmp: Path) -> ChoirHome:
    return daemon_home(short_tmp)


@pytest.fixture
def stage(home: ChoirHome) -> ConfigStage:
    return ConfigStage(load_home(home))


@pytest.fixture
async def pool(pg_params: ConnectParams) -> AsyncIterator[Pool]:
    async with open_pool(pg_params, min_size=1, max_size=4) as pool:
        async with pool.acquire() as conn:
            await apply_control_schema(conn)
        yield pool


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def services(pool: Pool, stage: ConfigStage, clock: Clock) -> AgentServices:
    return AgentServices.build(pool, stage, clock=clock)


@pytest.fixture
def armed(monkeypatch: pytest.MonkeyPatch) -> Callable[[str], None]:
    """Arm failpoints in this process for the test (`armed("name=panic")`); disarmed after."""
    monkeypatch.setattr(failpoints, "_armed", None)

    def arm(spec: str) -> None:
        failpoints.arm_from_env({failpoints.ENV_VAR: spec})

    return arm
