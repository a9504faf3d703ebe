"""Fetching and checking the repos at `config load` and choird's start (§6.5, §17.6).

`config load` fetches every configured repo into `$CHOIR_HOME/repos/`, then checks what each
agent would be built from: its merged tools and skills (`agent_tree`), the global repo's
`Dockerfile.base` and the agent's `Dockerfile`. A fetch that fails is a warning (the stale
clone is used and flagged in `repos/state.json`, which `status` shows); a repo that is invalid
is an error, and then nothing is staged. choird's start fetches in the background, warning
only, so an unreachable remote never delays it.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from choir.config import ChoirConfig
from choir.daemon.images import repos
from choir.errors import ConfigError
from choir.home import ChoirHome
from choir.logs import get_logger

log = get_logger("choird.repos")


@dataclass(frozen=True)
class RepoRefresh:
    """What a fetch-and-check found."""

    checkouts: list[repos.RepoCheckout]
    warnings: list[str]
    """Fetch failures and repos that could not be read (placeholders, never cloned)."""
    errors: list[str]
    """Invalid repo contents: nothing may be staged."""


def refresh(home: ChoirHome, config: ChoirConfig) -> RepoRefresh:
    """Fetch every repo of `config`, then check each agent's inputs (blocking)."""
    # Here, not at the top: choird imports this module to fetch at start, and the checks pull
    # in the Docker SDK, which a choird on the process runtime never needs.
    from choir.daemon.images.base import base_dockerfile
    from choir.daemon.images.build import agent_dockerfile

    found, warnings = repos.checkouts(home, config)
    by_key = {checkout.key: checkout for checkout in found}
    global_repo = by_key.get(repos.GLOBAL)
    if global_repo is None:
        return RepoRefresh(found, warnings, [])
    errors = _problems("global repo", base_dockerfile, global_repo.path)
    for agent_id in sorted(config.agents):
        agent_repo = by_key.get(repos.repo_key(agent_id))
        if agent_repo is not None:
            errors += _problems(f"{agent_id} repo", agent_dockerfile, agent_repo.path)
            errors += _problems(agent_id, _merge, agent_id, global_repo, agent_repo)
    return RepoRefresh(found, warnings, errors)


async def fetch_at_start(home: ChoirHome, config: ChoirConfig) -> None:
    """choird's start: fetch every repo in the background; failures are logged warnings."""
    try:
        _, warnings = await asyncio.to_thread(repos.checkouts, home, config)
    except Exception:  # never let a fetch take choird down
        log.exception("repo fetch at start failed")
        return
    for warning in warnings:
        log.warning(warning)
    log.info("repos fetched", fields={"warnings": len(warnings)})


def repo_status(home: ChoirHome, config: ChoirConfig) -> list[dict[str, Any]]:
    """Every configured repo for `status`: local, or its clone's last fetch and staleness."""
    states = repos.repo_states(home)
    wanted = [(repos.GLOBAL, config.global_repo)]
    wanted += [(repos.repo_key(agent_id), agent.repo) for agent_id, agent in config.agents.items()]
    rows = []
    for key, repo in wanted:
        url = repo.url.strip()
        local = bool(url) and repos.is_local(url)
        state = {} if local else states.get(key, {})
        rows.append(
            {
                "key": key,
                "url": repos.display_url(url),
                "ref": repo.ref,
                "local": local,
                "commit": state.get("commit"),
                "stale": bool(state.get("stale")),
                "error": state.get("error"),
                "fetched_at": state.get("fetched_at"),
            }
        )
    return rows


def _merge(agent_id: str, global_repo: repos.RepoCheckout, agent_repo: repos.RepoCheckout) -> None:
    from choir.daemon.images.agent_tree import materialize

    with tempfile.TemporaryDirectory(prefix=f"choir-check-{agent_id}-") as scratch:
        materialize(
            global_repo.path,
            agent_repo.path,
            Path(scratch) / "tree",
            agent_id=agent_id,
            image_version="check",
            commits=(global_repo.commit, agent_repo.commit),
        )


def _problems(where: str, check: Callable[..., object], *args: Any) -> list[str]:
    """The problems `check(*args)` raises as a ConfigError, each prefixed with `where`."""
    try:
        check(*args)
    except ConfigError as error:
        return [f"{where}: {problem}" for problem in error.problems or [error.message]]
    return []
