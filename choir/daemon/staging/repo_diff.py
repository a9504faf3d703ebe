"""The repo half of `config diff` (§17.6): what a redeploy of each running agent would change.

A running agent runs the global and agent repo commits its version.json names; the staged
home's repos (fetched by `config load`) may be further on. For each running agent whose repos
moved, the tools, skills, identity files and Dockerfiles that differ between the two commits
are listed (`~ global:tools/x.json`, `+ agent-1:skills/y.json`), then the commits themselves
(`~ agent-1 repo: abc1234→def5678`) — all restart-required, applied by `agent update`. A local
repo with uncommitted work is compared as its working tree. An agent that is not running is
left out: its next start builds from the repos as they are. A commit the repo no longer has
(history rewritten) still shows its commit line, without files.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from choir.config import ChoirConfig
from choir.config.scaffolding.gitrepo import git
from choir.daemon.images import repos
from choir.daemon.staging.diff import ConfigChange, Op
from choir.errors import ChoirError
from choir.home import ChoirHome

WATCHED: Final = ("tools", "skills", "identity", "Dockerfile", "Dockerfile.base")
"""What a repo contributes to an agent's image (§6.5): the paths whose changes are listed."""
_OPS: Final[Mapping[str, Op]] = {"A": "+", "D": "-"}


@dataclass(frozen=True)
class _Moved:
    """One repo of one running agent, from the commit it runs to the staged one."""

    side: str
    """`global` or the agent id."""
    path: str
    """The repo's working tree."""
    was: str
    now: str


def repo_changes(
    home: ChoirHome, config: ChoirConfig, running: Mapping[str, Mapping[str, Any]]
) -> list[ConfigChange]:
    """The repo changes for the running agents (`agent id -> version.json` of what each runs),
    against the staged `config`'s repos (blocking: runs git)."""
    moved: dict[tuple[str, str, str], tuple[str, list[str]]] = {}
    for agent_id, image in sorted(running.items()):
        if agent_id not in config.agents:
            continue  # removed by the staged config: config.json's diff says so
        for repo in _moved(home, config, agent_id, image):
            moved.setdefault((repo.side, repo.was, repo.now), (repo.path, []))[1].append(agent_id)
    changes: list[ConfigChange] = []
    for (side, was, now), (path, agents) in moved.items():
        action = _action(agents)
        for op, name in changed_files(Path(path), was, now):
            changes.append(ConfigChange(op, side, name, "restart-required", action))
        shown = f"{_short(was)}→{_short(now)}"
        changes.append(ConfigChange("~", f"{side} repo", shown, "restart-required", action))
    return changes


def _moved(
    home: ChoirHome, config: ChoirConfig, agent_id: str, image: Mapping[str, Any]
) -> list[_Moved]:
    found = []
    wanted = (
        ("global", repos.GLOBAL, config.global_repo, "global_repo_commit"),
        (agent_id, repos.repo_key(agent_id), config.agents[agent_id].repo, "agent_repo_commit"),
    )
    for side, key, ref, field in wanted:
        was = str(image.get(field) or "")
        try:
            now = repos.checkout(home, key, ref, fetch=False)
        except ChoirError:
            continue  # an unreadable repo is already a config load error or warning
        if was and was != now.commit:
            found.append(_Moved(side, str(now.path), was, now.commit))
    return found


def changed_files(path: Path, was: str, now: str) -> list[tuple[Op, str]]:
    """`(op, file)` for each watched file that differs between commits `was` and `now` (`now`
    ending `+dirty`: the working tree); [] when git cannot compare them."""
    base = was.removesuffix("+dirty")
    target = [] if now.endswith("+dirty") else [now]
    try:
        out = git(path, "diff", "--name-status", "--no-renames", base, *target, "--", *WATCHED)
    except ChoirError:
        return []
    rows = [line.split("\t", 1) for line in out.splitlines() if "\t" in line]
    return [(_OPS.get(status[:1], "~"), name) for status, name in rows]


def _short(commit: str) -> str:
    dirty = "+dirty" if commit.endswith("+dirty") else ""
    return commit.removesuffix("+dirty")[:7] + dirty


def _action(agents: list[str]) -> str:
    return f"choirctl agent update {agents[0]}" if len(agents) == 1 else "choirctl agent update-all"
