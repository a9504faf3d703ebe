"""`choirctl agent init` (§17.8): add a placeholder agent to config.json and scaffold its repo.

The new entry is checked before anything is written: the agent id, that it is new, that every
resource named on the command line exists, and that the edited file has no problem the current
file does not already have. The repo is built aside and moved into place, and config.json is
replaced atomically last; a failure undoes both.
"""

from __future__ import annotations

import re
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from choir.config.edit import add_member
from choir.config.jsonparse import parse_json_object
from choir.config.load import read_config_text
from choir.config.names import validate_agent_id
from choir.config.rollback import Rollback
from choir.config.scaffolding.gitrepo import require_git
from choir.config.scaffolding.scaffold import (
    RepoState,
    create_agent_repo,
    default_agent_repo,
    repo_state,
)
from choir.config.scaffolding.skeleton import agent_entry
from choir.config.secret_store import SecretStore
from choir.config.validation.references import (
    AGENT_DEFAULTS,
    REQUIRED_DEFAULTS,
    names_in,
    unknown_name,
)
from choir.config.validation.validate import CONFIG_SOURCE, validate_config_text
from choir.errors import ChoirError, ConfigError, ConflictError, UsageError
from choir.home import ChoirHome

_SCP_LIKE = re.compile(r"^[\w.-]+@[\w.-]+:")


@dataclass(frozen=True)
class AgentInitResult:
    agent_id: str
    config_file: Path
    repo_url: str
    repo_path: Path | None
    """The local repository, or None for a remote URL the operator must create."""
    repo_created: bool
    commit: str | None
    unset: list[str] = field(default_factory=list)
    """Required defaults still empty."""
    warnings: list[str] = field(default_factory=list)
    """Warnings the new entry adds, other than its unset defaults (those are in `unset`)."""


def local_repo_path(url: str) -> Path | None:
    """The filesystem path `url` names, or None for a remote (`https://…`, `git@host:…`)."""
    if url.startswith("file://"):
        return Path(url.removeprefix("file://"))
    if "://" in url or _SCP_LIKE.match(url) or (":" in url and not url.startswith((".", "/"))):
        return None
    return Path(url).expanduser().absolute()


def _parse(text: str) -> dict[str, Any]:
    parsed = parse_json_object(text, CONFIG_SOURCE)
    if parsed.data is None:
        raise ConfigError(parsed.problems, header="config.json cannot be edited:")
    return parsed.data


def _check_new(data: Mapping[str, Any], agent_id: str, config_file: Path) -> None:
    agents = data.get("agents", {})
    if not isinstance(agents, Mapping):
        raise ConfigError(["agents: must be a JSON object"], header="config.json cannot be edited:")
    if agent_id in agents:
        raise ConflictError(f"agent {agent_id!r} already exists in {config_file}")


def _check_flags(data: Mapping[str, Any], defaults: Mapping[str, str]) -> None:
    problems = [
        unknown_name(f"--{key.replace('_', '-')}", section, name, names_in(data, section))
        for key, section in AGENT_DEFAULTS.items()
        if (name := defaults.get(key)) and name not in names_in(data, section)
    ]
    if problems:
        raise UsageError("; ".join(problems))


def _repo_plan(home: ChoirHome, agent_id: str, repo: str) -> tuple[str, Path | None, RepoState]:
    path = local_repo_path(repo) if repo else default_agent_repo(home, agent_id)
    if path is None:
        return repo, None, "missing"
    state = repo_state(path)
    if state == "occupied":
        raise ConflictError(
            f"{path} exists and is not a git repository: empty it or pass another --repo"
        )
    return str(path), path, state


def _secret_names(home: ChoirHome) -> list[str] | None:
    try:
        return SecretStore.load(home.secrets_file).names()
    except ChoirError:
        return None


def _introduced(old_text: str, new_text: str, home: ChoirHome) -> tuple[list[str], list[str]]:
    """The errors and warnings the edit adds to those config.json already has."""
    secrets = _secret_names(home)
    before, after = (validate_config_text(t, secrets) for t in (old_text, new_text))
    errors = [e for e in after.errors if e not in before.errors]
    return errors, [w for w in after.warnings if w not in before.warnings]


def _write(home: ChoirHome, agent_id: str, text: str, scaffold: Path | None) -> str | None:
    """Scaffold the repo (if asked) and replace config.json, all or nothing; the commit."""
    if scaffold is not None:
        require_git()
    commit = None
    mode = stat.S_IMODE(home.config_file.stat().st_mode)
    try:
        with Rollback() as rollback:
            if scaffold is not None:
                commit = create_agent_repo(rollback, scaffold, agent_id)
            rollback.write(home.config_file, text.encode(), mode)
    except OSError as err:
        reason = f"{err.strerror}: {err.filename}" if err.filename else str(err)
        raise ChoirError(f"cannot add {agent_id} ({reason}); nothing was changed") from None
    return commit


def init_agent(
    home: ChoirHome, agent_id: str, *, repo: str = "", defaults: Mapping[str, str]
) -> AgentInitResult:
    """Add `agent_id` to `home`'s config.json; `defaults` maps default keys to names or ""."""
    validate_agent_id(agent_id)
    text = read_config_text(home)
    data = _parse(text)
    _check_new(data, agent_id, home.config_file)
    _check_flags(data, defaults)
    url, path, state = _repo_plan(home, agent_id, repo.strip())
    new_text = add_member(text, "agents", agent_id, agent_entry(url, defaults))
    problems, warnings = _introduced(text, new_text, home)
    if problems:
        raise ConfigError(problems, header=f"adding {agent_id} would make config.json invalid:")
    scaffold = path if path is not None and state != "repo" else None
    commit = _write(home, agent_id, new_text, scaffold)
    placeholders = f"agents.{agent_id}.defaults."
    return AgentInitResult(
        agent_id,
        home.config_file,
        url,
        path,
        scaffold is not None,
        commit,
        [key for key in REQUIRED_DEFAULTS if not defaults.get(key)],
        [w for w in warnings if not w.startswith(placeholders)],
    )
