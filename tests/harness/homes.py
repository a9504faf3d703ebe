"""`$CHOIR_HOME`s for end-to-end runs: what `choirctl init` writes, plus what a test needs.

Unix socket paths (choird's, each agent's, and an embedded Postgres's) are limited to 107 bytes,
so homes live in short directories directly under /tmp rather than in pytest's tmp_path.

`choirctl init` runs ten git commands (0.2-0.5 s on a loaded machine); `initialized` runs it
once per test process and copies the result into each new home, its paths rewritten. The
tests of `init` itself (tests/config, tests/ctl/test_init.py) run the real thing every time.
"""

from __future__ import annotations

import atexit
import json
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from choir.config import SecretStore, init_home
from choir.config.scaffolding.gitrepo import git
from choir.home import ChoirHome
from choir.store.postgres.target import ConnectParams

GIT_TOKEN = "ghp-e2e-git-token"
"""The secret of agent-1's git identity: the one secret its session may ask for."""
PG_PASSWORD = "pg-e2e-password"
"""The external Postgres password (the test server trusts local connections and ignores it)."""
SECRETS = {"git-token": GIT_TOKEN, "pg": PG_PASSWORD}


@contextmanager
def short_root(prefix: str = "ce-") -> Iterator[Path]:
    """A fresh directory under /tmp with a short path; removed afterwards."""
    root = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


_made: ChoirHome | None = None
"""The home `initialized` copies: `choirctl init`'s, made on first use in this process."""


def initialized(home: ChoirHome) -> ChoirHome:
    """`home` as `choirctl init` (`init_home`) makes it: a copy of one made by it in this
    process, with the paths in config.json pointing into `home` (the repos' history is the
    same in every copy but for each repo's last commit, amended to be the copy's own)."""
    global _made
    if _made is None:
        made = ChoirHome(Path(tempfile.mkdtemp(prefix="choir-init-", dir="/tmp")) / "h")
        atexit.register(shutil.rmtree, made.root.parent, ignore_errors=True)
        init_home(made)
        _made = made
    shutil.copytree(_made.root, home.root, symlinks=True, dirs_exist_ok=True)
    text = home.config_file.read_text()
    home.config_file.write_text(text.replace(f'"{_made.root}/', f'"{home.root}/'))
    # choird names agent images by the repos' commits: every copy's must be its own, as two
    # `choirctl init`s' are, or homes on parallel workers would share image tags
    trailer = f"Test-Home: {uuid.uuid4().hex}"
    for repo in (home.sources / "global", home.sources / "agents" / "agent-1"):
        git(repo, "commit", "--amend", "--no-edit", "--quiet", "--no-verify", "--trailer", trailer)
    return home


def external_postgres(params: ConnectParams) -> dict[str, Any]:
    """config.json's `postgres` section for an existing server (the test session's)."""
    return {
        "host": params.host,
        "port": params.port,
        "database": params.database,
        "user": params.user,
        "secret": "pg",
    }


def make_home(root: Path, *, postgres: dict[str, Any] | None = None, **settings: Any) -> ChoirHome:
    """`choirctl init` in `root/h`, agent-1's git identity given a secret, agent-2 added,
    `settings` (top-level config keys such as `heartbeat_interval_ms`) applied, and `postgres`
    replacing the embedded server when given."""
    home = initialized(ChoirHome(root / "h"))
    data = read_config(home)
    data["git_identities"]["agent-1"]["secret"] = "git-token"
    add_second_agent(data, root)
    data.update(settings)
    if postgres is not None:
        data["postgres"] = postgres
    write_config(home, data)
    store = SecretStore.empty()
    for name, value in SECRETS.items():
        store = store.with_secret(name, value)
    store.save(home.secrets_file)
    return home


def scripted_home(root: Path, pg_params: ConnectParams, model_url: str) -> ChoirHome:
    """A choir home on the test's Postgres whose `demo` model is the test's scripted server."""
    home = make_home(root, postgres=external_postgres(pg_params))
    data = read_config(home)
    data["models"]["demo"] = {"provider": "scripted", "model": "e2e", "endpoint": model_url}
    write_config(home, data)
    return home


def add_second_agent(data: dict[str, Any], root: Path) -> None:
    """agent-2: its own repo (a clone of agent-1's: a proposal may change only its own agent's
    repo), workspace, git identity and console DM."""
    repo = root / "repo-agent-2"
    if not repo.exists():
        git(root, "clone", "-q", data["agents"]["agent-1"]["repo"]["url"], str(repo))
    data["workspaces"]["other"] = {"path": str(root / "ws-other")}
    data["dms"]["ops"] = {"gateway": "console", "user_id": "ops"}
    data["git_identities"]["agent-2"] = {"name": "choir agent-2", "email": "agent-2@choir.local"}
    data["agents"]["agent-2"] = {
        "repo": {**data["agents"]["agent-1"]["repo"], "url": str(repo)},
        "defaults": {"workspace": "other", "llm": "demo", "git_identity": "agent-2", "dm": "ops"},
    }


def read_config(home: ChoirHome) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(home.config_file.read_text())
    return data


def write_config(home: ChoirHome, data: dict[str, Any]) -> None:
    home.config_file.write_text(json.dumps(data, indent=2) + "\n")
