"""Starter repositories: the global repo from `seeds/global`, and the per-agent repo (§6.5, §17.8).

Both are created as local git repositories with one commit. They live under
`$CHOIR_HOME/sources/`, apart from `repos/`, which holds choird's own clones of them.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Literal

import choir
from choir.config.rollback import Rollback
from choir.config.scaffolding.gitrepo import init_with_commit, is_repo
from choir.errors import ChoirError
from choir.home import ChoirHome

RepoState = Literal["missing", "empty", "repo", "occupied"]

DOCKERFILE = """\
# Image of agent {agent_id} (§6.5): built FROM the base image of the global repo's Dockerfile.base.
# Add agent-specific system packages and tool builds here. Tools, skills and identity are merged
# in by `choirctl agent build`: do not COPY them.
FROM choir-base
"""

IDENTITY_HEADER = """\
<!-- {agent_id}: this file overrides identity/{name} of the global repo (§6.5).
     It starts as a copy of the global one; edit it to give {agent_id} its own voice. -->

"""

FALLBACK_IDENTITY = {
    "SOUL.md": "You are {agent_id}, a helpful assistant. Be brief, concrete and honest.\n",
    "SOUL-CORE.md": "You are {agent_id}'s core lane: plan, use tools carefully, report results.\n",
}
"""Used only when the seeds carry no identity file of that name."""


def seeds_dir() -> Path:
    """The starter content `choirctl init` installs: `seeds/` of the source tree.

    `choir/_seeds` is a symlink to it, so the wheel carries the seeds as package data and a
    source checkout resolves the symlink to the same files.
    """
    path = Path(choir.__file__).resolve().parent / "_seeds"
    if not path.is_dir():
        raise ChoirError(f"starter content not found at {path}: reinstall choir from source")
    return path


def global_seed_dir() -> Path:
    path = seeds_dir() / "global"
    if not path.is_dir():
        raise ChoirError(f"starter global repo not found at {path}: reinstall choir")
    return path


def sources_dir(home: ChoirHome) -> Path:
    """Where `choirctl init` puts the operator's own repositories."""
    return home.sources


def default_global_repo(home: ChoirHome) -> Path:
    return sources_dir(home) / "global"


def default_agent_repo(home: ChoirHome, agent_id: str) -> Path:
    return sources_dir(home) / "agents" / agent_id


def repo_state(path: Path) -> RepoState:
    if not path.exists():
        return "missing"
    if path.is_dir() and not any(path.iterdir()):
        return "empty"
    return "repo" if path.is_dir() and is_repo(path) else "occupied"


def agent_repo_files(agent_id: str) -> dict[str, str]:
    """Relative path -> content of a new per-agent repo (§17.8 step 3)."""
    files = {
        "Dockerfile": DOCKERFILE.format(agent_id=agent_id),
        "tools/.gitkeep": "",
        "skills/.gitkeep": "",
    }
    for name, fallback in FALLBACK_IDENTITY.items():
        files[f"identity/{name}"] = IDENTITY_HEADER.format(
            agent_id=agent_id, name=name
        ) + _seed_identity(name, fallback.format(agent_id=agent_id))
    return files


def _seed_identity(name: str, fallback: str) -> str:
    try:
        return (global_seed_dir() / "identity" / name).read_text(encoding="utf-8")
    except (ChoirError, FileNotFoundError):
        return fallback


def _write_files(root: Path, files: dict[str, str]) -> None:
    for relative, content in files.items():
        target = root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8")


def _stage(rollback: Rollback, final: Path) -> Path:
    rollback.make_dirs(final.parent)
    staged = Path(tempfile.mkdtemp(dir=final.parent, prefix=f".{final.name}."))
    staged.chmod(0o755)
    rollback.on_failure(lambda: shutil.rmtree(staged, ignore_errors=True))
    return staged


def create_agent_repo(rollback: Rollback, path: Path, agent_id: str) -> str:
    """Scaffold the per-agent repo at `path` (absent or empty); the initial commit's hash."""
    staged = _stage(rollback, path)
    _write_files(staged, agent_repo_files(agent_id))
    commit = init_with_commit(staged, f"Scaffold agent {agent_id}")
    rollback.install_dir(staged, path)
    return commit


def create_global_repo(rollback: Rollback, path: Path) -> str:
    """Copy `seeds/global` to `path` (absent or empty) as a new repository; the commit's hash."""
    staged = _stage(rollback, path)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".git")
    shutil.copytree(global_seed_dir(), staged, ignore=ignore, dirs_exist_ok=True)
    commit = init_with_commit(staged, "choir starter global repo")
    rollback.install_dir(staged, path)
    return commit
