"""`choir.propose.repo_change` (§20 user-initiated flow): a branch the agent committed in its own
clone of its repo, in its workspace, fetched by choird and bound to its full diff.

The agent never gets write access to its repo: it clones it from a read-only view
(`$CHOIR_AGENT_REPO`: the repo's host path for an unsandboxed process agent, a read-only mount at
`/agent-repo` in a container or the bwrap sandbox — `mount_source`; when `clone_source` refuses the
repo there is no view and the tool is not offered), commits on a branch in `/workspace`, and
proposes that branch. choird then fetches the branch *from* the workspace clone into the agent's
repo as `proposal/<session>/<slug>` — the clone is checked first: inside the workspace, no symlink
on the way, a real `.git` directory, no alternates or linked worktree pointing elsewhere. A
container's clone belongs to the agent's uid (choird as root), so the fetch trusts that one clone
explicitly (`safe.directory`, given to the upload-pack git runs in it). The branch must share
history with the configured ref (`base` = their merge base) and change something; it may not add
symlinks or submodules (a merge would write them into the operator's checkout, which the build
reads).

The approval is bound to the SHA-256 of the base, the tip and the full diff `base..tip`
(`Reviewed.sha256`): `approval show` prints that diff, and the apply re-reads the fetched branch
and refuses it if the hash differs (the branch moved after the proposal). Rejected or failed, the
branch stays in the agent's repo for inspection; nothing deletes it.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Final

from choir.config import ChoirConfig
from choir.core.integrations import AGENT_REF_ENV, AGENT_REPO_ENV
from choir.daemon.images.repos import is_local
from choir.daemon.proposals.git_apply import (
    ApplyError,
    TargetRepo,
    _git,
    _out,
    shared_with,
    target_repo,
)
from choir.errors import UsageError

REPO_CHANGE: Final = "repo_change"
DEFAULT_CLONE: Final = "repo"
"""Where in /workspace the clone is when the proposal does not say."""
_SLUG: Final = re.compile(r"[^a-z0-9_.-]+")
_MODES_REFUSED: Final = {"120000": "a symlink", "160000": "a submodule"}


@dataclass(frozen=True)
class Reviewed:
    """A fetched proposal branch as the approver reviews it."""

    branch: str
    """`proposal/<session>/<slug>` in the agent's repo: where it is left for inspection."""
    base: str
    """The merge base with the configured ref: what the diff is against."""
    commit: str
    diff: str

    @property
    def sha256(self) -> str:
        bound = f"{self.base}\n{self.commit}\n{self.diff}"
        return hashlib.sha256(bound.encode()).hexdigest()

    def shown(self, repo: TargetRepo) -> str:
        """The diff with a first line saying which branch it is, and where."""
        head = f"# {self.branch} in {repo.path} ({self.base[:12]}..{self.commit[:12]})\n"
        return head + self.diff


def clone_source(config: ChoirConfig, agent_id: str) -> tuple[str, str] | str:
    """(repo path, ref) an agent may clone and propose a branch of, or why it cannot: its repo
    must be a local repository that neither the global repo nor another agent uses."""
    agent = config.agents.get(agent_id)
    url = agent.repo.url.strip() if agent is not None else ""
    if agent is None or not url:
        return f"agent {agent_id} has no repo: set agents.{agent_id}.repo.url"
    if not is_local(url):
        return (
            f"agents.{agent_id}.repo.url is a remote URL; a repo change is proposed only for "
            "a local repository path (skills and tools are applied to a remote too)"
        )
    shared = shared_with(config, agent_id)
    if shared is not None:
        return shared
    return str(Path(url).expanduser()), agent.repo.ref


def mount_source(config: ChoirConfig, agent_id: str) -> tuple[Path, str] | str:
    """(the repo's resolved host path, ref) a runtime mounts read-only for the agent to clone,
    or why not: `clone_source`'s refusals, or no such directory (a bind mount of a missing
    source would have the engine create it)."""
    source = clone_source(config, agent_id)
    if isinstance(source, str):
        return source
    path = Path(os.path.realpath(source[0]))
    if not path.is_dir():
        return f"agents.{agent_id}.repo.url {source[0]} is not a directory: nothing to clone"
    return path, source[1]


def clone_environment(path: str, ref: str) -> dict[str, str]:
    """What tells the agent (and its tools) where to clone from: the path as it sees it."""
    return {AGENT_REPO_ENV: path, AGENT_REF_ENV: ref}


def slug_of(payload: Mapping[str, Any]) -> str:
    """The last part of the proposed branch, made safe: `proposal/<session>/<slug>` in the repo."""
    branch = str(payload.get("branch") or "")
    slug = _SLUG.sub("-", branch.rstrip("/").rsplit("/", 1)[-1].lower()).strip("-.")
    return slug or "change"


def fetch_proposal(
    config: ChoirConfig,
    agent_id: str,
    workspace: Path,
    payload: Mapping[str, Any],
    into: str,
) -> tuple[TargetRepo, Reviewed]:
    """Fetch the proposed branch from the clone in `workspace` into the agent's repo as branch
    `into`; what the approver reviews. `UsageError` naming the problem (and nothing fetched,
    or the fetched branch removed again) when it cannot be proposed."""
    branch = payload.get("branch")
    if not isinstance(branch, str) or not branch.strip():
        raise UsageError("the proposal has no `branch`: name the branch you committed to")
    if not isinstance(payload.get("description"), str) or not payload["description"].strip():
        raise UsageError("the proposal has no `description`: say what the change does and why")
    source = clone_source(config, agent_id)
    if isinstance(source, str):
        raise UsageError(f"{source}: repo changes cannot be proposed for this agent")
    try:
        repo = target_repo(config, agent_id)
    except ApplyError as error:
        raise UsageError(error.message) from None
    clone = _clone_dir(workspace, str(payload.get("path") or DEFAULT_CLONE))
    _valid_branch(repo, branch)
    # git runs upload-pack in the clone without choird's `-c` options: the agent's uid may own
    # it (docker, choird as root), which git refuses unless trusted where upload-pack reads it
    # (by its real path: what git compares with, whatever links lead to the workspace)
    trusted = shlex.quote(os.path.realpath(clone / ".git"))
    upload_pack = f"git -c safe.directory={trusted} upload-pack"
    _git(
        repo.path,
        "fetch",
        f"--upload-pack={upload_pack}",
        "--quiet",
        "--no-tags",
        "--no-recurse-submodules",
        "--no-write-fetch-head",
        str(clone),
        f"+refs/heads/{branch}:refs/heads/{into}",
        env={"GIT_NO_LAZY_FETCH": "1", "GIT_ALLOW_PROTOCOL": "file"},
    )
    try:
        return repo, reviewed(repo, into)
    except UsageError:
        _git(repo.path, "update-ref", "-d", f"refs/heads/{into}", ok=(0, 1))
        raise


def reviewed(repo: TargetRepo, branch: str) -> Reviewed:
    """The fetched `branch` as reviewed: its base on the ref, its tip, the full diff."""
    found, commit = _git(
        repo.path, "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}^{{commit}}", ok=(0, 1)
    )
    if found != 0:
        raise UsageError(f"branch {branch} is not in {repo.path} (deleted since the proposal?)")
    code, base = _git(repo.path, "merge-base", f"refs/heads/{repo.ref}", commit, ok=(0, 1))
    if code != 0:
        raise UsageError(
            f"the branch does not descend from {repo.ref}: clone the agent's repo, branch from "
            f"{repo.ref} and commit there"
        )
    if base == commit:
        raise UsageError(f"the branch has no commit that {repo.ref} lacks: nothing to propose")
    raw = _out(repo.path, "diff", "--raw", "--no-abbrev", "--no-renames", base, commit)
    for line in raw.splitlines():
        fields = line.split("\t", 1)
        mode = fields[0].split()[1] if len(fields[0].split()) > 1 else ""
        if mode in _MODES_REFUSED:
            path = fields[1] if len(fields) > 1 else "?"
            raise UsageError(f"the branch adds {_MODES_REFUSED[mode]} at {path}: not allowed")
    diff = _out(
        repo.path, "diff", "--no-color", "--no-ext-diff", "--no-textconv", "--binary", base, commit
    )
    return Reviewed(branch, base, commit, diff + "\n" if diff else "")


def applicable(repo: TargetRepo, branch: str, sha256: str | None) -> Reviewed:
    """The fetched branch, refused (`ApplyError`) unless it is exactly what was reviewed."""
    try:
        found = reviewed(repo, branch)
    except UsageError as error:
        raise ApplyError(f"{error.message}: nothing applied") from None
    if sha256 is None or found.sha256 != sha256:
        raise ApplyError(
            f"branch {branch} changed after the proposal (sha256 {found.sha256[:12]} ≠ "
            f"{str(sha256)[:12]}): nothing applied; the agent can propose it again"
        )
    return found


def _valid_branch(repo: TargetRepo, branch: str) -> None:
    code, _ = _git(repo.path, "check-ref-format", f"refs/heads/{branch}", ok=(0, 1))
    if code != 0 or branch.startswith("-"):
        raise UsageError(f"{branch!r} is not a valid branch name")


def _clone_dir(workspace: Path, path: str) -> Path:
    """The clone `path` (relative to /workspace), refused unless it is a plain git repository
    inside the workspace: no `..`, no symlink on the way, `.git` a real directory that borrows
    no objects from elsewhere (alternates) and is no linked worktree of another repository."""
    parts = PurePosixPath(path.strip().removeprefix("/workspace/")).parts
    if path.strip().startswith("/") and not path.strip().startswith("/workspace/"):
        raise UsageError(f"clone path {path!r} is outside /workspace: give it relative to it")
    if any(part in ("..", "") for part in parts) or "\\" in path:
        raise UsageError(f"clone path {path!r} leaves /workspace: give a path inside it")
    here = workspace
    for part in [*parts, ".git"]:
        here = here / part
        try:
            mode = here.lstat().st_mode
        except OSError:
            raise UsageError(
                f"no git clone at /workspace/{'/'.join(parts)}: clone your repo there first "
                f'(git clone "${AGENT_REPO_ENV}" {"/".join(parts) or "."})'
            ) from None
        if stat.S_ISLNK(mode) or not stat.S_ISDIR(mode):
            raise UsageError(
                f"/workspace/{'/'.join(parts)} is not a plain clone ({here.name} is a symlink "
                "or not a directory): clone the repo again with git clone"
            )
    git_dir = here
    for borrowed in ("objects/info/alternates", "commondir"):
        if os.path.lexists(git_dir / borrowed):
            raise UsageError(
                f"the clone's .git/{borrowed} points at another repository: clone without "
                "--shared/--reference and not as a worktree"
            )
    return git_dir.parent
