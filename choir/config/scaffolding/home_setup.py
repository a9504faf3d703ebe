"""`choirctl init` (§6.2): a `$CHOIR_HOME` that `choir up` can run with no editing.

Everything is checked before the first write, and every write is registered with a `Rollback`,
so a failure leaves an existing home exactly as it was and a new one absent. An existing
secrets.json and existing repositories are never replaced.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from choir.config.rollback import Rollback
from choir.config.scaffolding.gitrepo import require_git
from choir.config.scaffolding.scaffold import (
    RepoState,
    create_agent_repo,
    create_global_repo,
    default_agent_repo,
    default_global_repo,
    global_seed_dir,
    repo_state,
)
from choir.config.scaffolding.skeleton import (
    DEFAULT_AGENT,
    default_workspace,
    render,
    skeleton_config,
)
from choir.config.secret_store import SECRETS_MODE
from choir.config.validation.validate import validate_config_text
from choir.errors import ChoirError, ConflictError
from choir.home import ChoirHome

CONFIG_MODE = 0o600
"""config.json holds no secrets, but host paths and user ids are nobody else's business."""
SCRATCH_DIRS = (".choirtmp/send", ".choirtmp/recv")
"""Per-workspace drop boxes for files to and from the user."""


@dataclass(frozen=True)
class RepoOutcome:
    path: Path
    created: bool
    """False when an existing repository was kept."""
    commit: str | None = None


@dataclass(frozen=True)
class InitResult:
    home: ChoirHome
    config_replaced: bool
    secrets_created: bool
    global_repo: RepoOutcome
    agent_repos: dict[str, RepoOutcome] = field(default_factory=dict)


def _usable(path: Path, what: str) -> RepoState:
    state = repo_state(path)
    if state == "occupied":
        raise ConflictError(
            f"{what} path {path} exists and is not a git repository: "
            "empty it or choose another path"
        )
    return state


def _preflight(home: ChoirHome, force: bool) -> None:
    if home.config_file.exists() and not force:
        raise ConflictError(
            f"{home.config_file} already exists: pass --force to overwrite it "
            "(secrets.json is kept)"
        )
    if home.root.exists() and not home.root.is_dir():
        raise ConflictError(f"{home.root} exists and is not a directory: choose another home")
    global_seed_dir()
    require_git()


def _repo(rollback: Rollback, path: Path, state: RepoState, agent_id: str | None) -> RepoOutcome:
    if state == "repo":
        return RepoOutcome(path, created=False)
    if agent_id is None:
        return RepoOutcome(path, True, create_global_repo(rollback, path))
    return RepoOutcome(path, True, create_agent_repo(rollback, path, agent_id))


def init_home(
    home: ChoirHome, *, force: bool = False, global_repo: Path | None = None
) -> InitResult:
    """Create or refresh `home`; see the module docstring for what is kept."""
    _preflight(home, force)
    global_path = (global_repo or default_global_repo(home)).expanduser().absolute()
    agent_path = default_agent_repo(home, DEFAULT_AGENT)
    global_state = _usable(global_path, "global repo")
    agent_state = _usable(agent_path, f"{DEFAULT_AGENT} repo")
    text = render(skeleton_config(home, global_path, agent_path))
    report = validate_config_text(text, None)
    if not report.ok:
        raise ChoirError(f"the built-in skeleton config is invalid: {report.errors[0]}")
    replaced = home.config_file.exists()
    secrets_new = not home.secrets_file.exists()
    try:
        with Rollback() as rollback:
            rollback.guard_dirs(home.directories())
            home.create_directories()
            # private like its parent: what an agent leaves there is no other user's to read
            rollback.make_dirs(default_workspace(home), mode=0o700)
            for scratch in SCRATCH_DIRS:
                rollback.make_dirs(default_workspace(home) / scratch)
            outcome = _repo(rollback, global_path, global_state, None)
            agent = _repo(rollback, agent_path, agent_state, DEFAULT_AGENT)
            if secrets_new:
                rollback.write(home.secrets_file, b"{}\n", SECRETS_MODE)
            rollback.write(home.config_file, text.encode(), CONFIG_MODE)
    except OSError as err:
        reason = f"{err.strerror}: {err.filename}" if err.filename else str(err)
        raise ChoirError(f"cannot set up {home.root} ({reason}); nothing was changed") from None
    return InitResult(home, replaced, secrets_new, outcome, {DEFAULT_AGENT: agent})
