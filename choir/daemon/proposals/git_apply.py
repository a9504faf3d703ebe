"""The git side of an apply: commit a proposal's file on its branch, merge it, undo the merge.

Nothing is written through the file system: the blob goes into git's object store and a
private index (`GIT_INDEX_FILE`), so a path cannot follow a symlink out of the repo, and the
operator's checkout is never half-written. The merge is computed with `git merge-tree` (a
conflict is reported, nothing changes); the configured ref then moves by compare-and-swap —
through `git merge --ff-only` when it is the branch checked out, which keeps that working tree
(what choird builds a local repo from) in step. Every operation is idempotent: a choird killed in
the middle runs it again on restart.

A repo configured as a remote URL is written through choird's own clone of it — the one builds
read (`images.repos`), fetched before each step, so a failed fetch fails the step rather than
applying to a stale copy. Its branches are read as that fetch saw them (`refs/remotes/origin/…`)
and moved by pushing to the remote under the clone's remote name (no URL, so no token, in
argv): the proposal branch by a plain push (refused unless new or the same commit), the
configured ref by `--force-with-lease` on the head the merge started from (compare-and-swap: a
remote that moved is refused, nothing pushed). A push also updates the clone's copy of the
branch, which is what the process runtime builds from without fetching. choird pushes with the
access it fetches with — its own environment (ssh in batch mode, the URL) — not the agent's
git identity's credentials, which only the agent holds.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit

from choir.config import ChoirConfig
from choir.config.model import RepoRef
from choir.config.scaffolding.gitrepo import git_env
from choir.daemon.images import repos
from choir.daemon.images.repos import display_url, is_local
from choir.daemon.proposals.skill import ProposedFile
from choir.errors import ChoirError
from choir.failpoints import failpoint_sync
from choir.home import ChoirHome

GIT_TIMEOUT_S = 60.0
_AGAIN = "propose it again"


class ApplyError(ChoirError):
    """A step of an apply failed; the message is the reason the approval records."""


@dataclass(frozen=True)
class TargetRepo:
    """The agent's repo an apply writes to: a local repository and the branch choird builds,
    or (`remote` set) choird's clone of a remote repository."""

    path: Path
    ref: str
    remote: str | None = None
    """The remote's URL as shown (no user info); None for a local repository."""
    remote_env: dict[str, str] = field(default_factory=dict, repr=False, compare=False)
    """What git reaching the remote runs with (`repos.remote_env`: its credentials)."""

    def branch_ref(self, branch: str) -> str:
        """Where `branch` is read: the repo's own, or the remote's as choird last fetched it."""
        return f"refs/remotes/origin/{branch}" if self.remote else f"refs/heads/{branch}"

    @property
    def where(self) -> str:
        return self.remote or str(self.path)


@dataclass(frozen=True)
class Identity:
    name: str
    email: str


def repo_url(config: ChoirConfig, agent_id: str) -> str:
    """The agent's repo (a local path or a git URL), refused when there is none or it is not the
    agent's alone: what a proposal is checked against when it is made (the rest `target_repo`
    checks when applying)."""
    agent = config.agents.get(agent_id)
    if agent is None:
        raise ApplyError(f"agent {agent_id} is no longer configured")
    url = agent.repo.url.strip()
    if not url:
        raise ApplyError(
            f"agent {agent_id} has no repo: set agents.{agent_id}.repo.url to a local repository "
            "or a git URL"
        )
    shared = shared_with(config, agent_id)
    if shared is not None:
        raise ApplyError(shared)
    return url


def shared_with(config: ChoirConfig, agent_id: str) -> str | None:
    """Why a proposal of `agent_id` must not write its repo, or None: the repo is the global
    repo or another agent's too, and a proposal changes only its own agent's repo (issue 17)."""
    mine = _same_place(config.agents[agent_id].repo.url)
    fix = f"give {agent_id} a repo of its own (agents.{agent_id}.repo.url)"
    if config.global_repo.url.strip() and _same_place(config.global_repo.url) == mine:
        why = "a proposal would change every agent"
        return f"agent {agent_id}'s repo is the global repo: {why}; {fix}"
    for other, entry in config.agents.items():
        if other != agent_id and entry.repo.url.strip() and _same_place(entry.repo.url) == mine:
            why = "a proposal would change both"
            return f"agent {agent_id}'s repo is also agent {other}'s: {why}; {fix}"
    return None


def _same_place(url: str) -> str:
    """Where `url` leads, so two spellings of one repo compare equal: a `file://` URL as the
    path it names, a path resolved, another URL without its user info (a token)."""
    url = url.strip()
    if url.startswith("file://"):
        url = unquote(urlsplit(url).path)
    return os.path.realpath(os.path.expanduser(url)) if is_local(url) else display_url(url)


def target_repo(config: ChoirConfig, agent_id: str, home: ChoirHome | None = None) -> TargetRepo:
    """The agent's configured repo with `ref` a branch: a local repository, or choird's clone
    of a remote one, fetched now (blocking; it needs `home`, where the clone is)."""
    url = repo_url(config, agent_id)
    agent = config.agents[agent_id]
    if not is_local(url):
        return _remote_target(home, agent_id, agent.repo)
    path = Path(url).expanduser()
    if _git(path, "rev-parse", "--verify", "--quiet", f"refs/heads/{agent.repo.ref}", ok=(0, 1))[0]:
        raise ApplyError(
            f"agents.{agent_id}.repo.ref {agent.repo.ref!r} is not a branch of {path}: "
            "proposals merge into a branch"
        )
    target = TargetRepo(path, agent.repo.ref)
    checked_out = _git(path, "symbolic-ref", "--quiet", "HEAD", ok=(0, 1))[1]
    if _has_worktree(target) and checked_out != f"refs/heads/{target.ref}":
        raise ApplyError(  # choird builds a local repo from its working tree, whatever it holds
            f"{path} has {checked_out or 'a detached HEAD'} checked out, not {target.ref}: "
            f"check out {target.ref} there so the build sees the merge"
        )
    return target


def _remote_target(home: ChoirHome | None, agent_id: str, repo: RepoRef) -> TargetRepo:
    """choird's clone of the remote repo, fetched: a fetch that fails fails the step (a build
    would carry on with the stale clone; an apply must see the remote as it is)."""
    shown = display_url(repo.url.strip())
    if home is None:
        raise ApplyError(f"agent {agent_id}'s repo {shown} is remote: choird has no clone here")
    key = repos.repo_key(agent_id)
    try:
        with repos.clone_lock(repos.clone_path(home, key)):
            found = repos.checkout(home, key, repo)
    except ChoirError as error:
        raise ApplyError(error.message) from None
    if found.stale:
        why = repos.repo_states(home).get(key, {}).get("error") or "the fetch failed"
        raise ApplyError(f"choird cannot fetch {shown} ({why}): fix the remote's access")
    target = TargetRepo(found.path, repo.ref, shown, repos.remote_env(repo.url.strip()))
    if _commit_at(found.path, target.branch_ref(repo.ref)) is None:
        raise ApplyError(
            f"agents.{agent_id}.repo.ref {repo.ref!r} is not a branch of {shown}: "
            "proposals merge into a branch"
        )
    return target


def identity_of(config: ChoirConfig, agent_id: str) -> Identity:
    """The agent's git identity (its default binding), which the proposal commit is made as."""
    name = config.agents[agent_id].defaults.git_identity
    found = config.git_identities.get(name)
    if found is None:
        raise ApplyError(
            f"agent {agent_id}'s git identity {name!r} is not in git_identities: add it"
        )
    return Identity(found.name, found.email)


def head(repo: TargetRepo) -> str:
    return _out(repo.path, "rev-parse", repo.branch_ref(repo.ref))


def commit_file(
    repo: TargetRepo, branch: str, file: ProposedFile, who: Identity, message: str
) -> tuple[str, str]:
    """Commit `file` on a new `branch` from the ref's head; (base, commit). An existing branch
    whose tip already holds exactly `file` is the same commit (a restart); any other is refused."""
    return commit_files(repo, branch, (file,), who, message)


def commit_files(
    repo: TargetRepo,
    branch: str,
    files: Sequence[ProposedFile],
    who: Identity,
    message: str,
) -> tuple[str, str]:
    """`commit_file` for several files in one commit (a tool's manifest and its stub). A
    remote gets the branch pushed (again, on a restart: the same commit is no change)."""
    with _locked(repo):
        base, commit = _committed(repo, branch, files, who, message)
        if repo.remote:
            _push(repo, f"{commit}:refs/heads/{branch}")
        return base, commit


def _committed(
    repo: TargetRepo,
    branch: str,
    files: Sequence[ProposedFile],
    who: Identity,
    message: str,
) -> tuple[str, str]:
    existing = _existing(repo, branch)
    if existing is not None:
        for file in files:
            if _blob_at(repo, existing, file.path) != _hash_object(repo, file.content, write=False):
                raise ApplyError(
                    f"branch {branch} exists with other content: delete it or propose anew"
                )
        return _out(repo.path, "rev-parse", f"{existing}^"), existing
    base = head(repo)
    with tempfile.TemporaryDirectory(prefix="choir-apply-") as scratch:
        index = {"GIT_INDEX_FILE": str(Path(scratch) / "index")}
        _out(repo.path, "read-tree", base, env=index)
        for file in files:
            blob = _hash_object(repo, file.content, write=True)
            _out(
                repo.path,
                "update-index",
                "--add",
                "--cacheinfo",
                f"100644,{blob},{file.path}",
                env=index,
            )
        tree = _out(repo.path, "write-tree", env=index)
    commit = _out(repo.path, "commit-tree", tree, "-p", base, "-m", message, env=_as(who))
    _out(repo.path, "update-ref", f"refs/heads/{branch}", commit, "")  # "": must not exist yet
    return base, commit


def _existing(repo: TargetRepo, branch: str) -> str | None:
    """The branch's commit if it exists: the remote's first (a restart after its push, even
    from a new clone), then the repo's own (a restart before it)."""
    for name in dict.fromkeys((repo.branch_ref(branch), f"refs/heads/{branch}")):
        found = _commit_at(repo.path, name)
        if found is not None:
            return found
    return None


def _commit_at(path: Path, name: str) -> str | None:
    code, out = _git(path, "rev-parse", "--verify", "--quiet", name, ok=(0, 1))
    return out if code == 0 else None


def read_git(repo: TargetRepo, *args: str, ok: tuple[int, ...] = (0,)) -> tuple[int, str]:
    """A read-only git command in the repo, as this module runs git; (exit code, stdout)."""
    return _git(repo.path, *args, ok=ok)


def merge(
    repo: TargetRepo, commit: str, who: Identity, message: str, expected: str | None = None
) -> str:
    """Merge `commit` into the ref (fast-forward when the ref has not moved); the ref's new
    head. Already merged: its head as it is. A conflict raises `ApplyError` naming the files.
    A remote's ref must still be at `expected` (the head the merge was recorded to start from,
    what an undo resets it to): one that moved fails the merge, nothing pushed."""
    with _locked(repo):
        current = head(repo)
        if _is_ancestor(repo, commit, current):
            return current
        if repo.remote and expected is not None and current != expected:
            raise ApplyError(f"{RemoteMoved.of(repo, expected, current).message}; {_AGAIN}")
        target = _merged(repo, current, commit, who, message)
        failpoint_sync("proposal.merge.before_push")
        try:
            _move(repo, current, target)
        except RemoteMoved as moved:
            raise ApplyError(f"{moved.message}; {_AGAIN}") from None
        failpoint_sync("proposal.merge.after_push")
        return target


def _merged(repo: TargetRepo, current: str, commit: str, who: Identity, message: str) -> str:
    """The ref's next head: `commit` itself (fast-forward), or a merge commit of the two."""
    target = commit
    if not _is_ancestor(repo, current, commit):
        code, out = _git(
            repo.path, "merge-tree", "--write-tree", "--name-only", current, commit, ok=(0, 1)
        )
        if code == 1:
            files = ", ".join(out.splitlines()[1:] or ["?"])
            raise ApplyError(f"merge conflict with {repo.ref} in {files}: propose it again")
        tree = out.splitlines()[0]
        target = _out(
            repo.path, "commit-tree", tree, "-p", current, "-p", commit, "-m", message, env=_as(who)
        )
    return target


def revert(repo: TargetRepo, merged_from: str, commit: str) -> None:
    """Put the ref back at `merged_from` if it holds the proposal's `commit` and nothing more
    (its head is the commit, or the merge of it); otherwise leave it and say why."""
    with _locked(repo):
        current = head(repo)
        if current == merged_from:
            return
        parents = _out(repo.path, "rev-list", "--parents", "-n", "1", current).split()[1:]
        if current != commit and parents != [merged_from, commit]:
            raise ApplyError(
                f"{repo.ref} moved on after the merge (now {current[:12]}): "
                f"revert {commit[:12]} by hand"
            )
        try:
            _move(repo, current, merged_from)
        except RemoteMoved as moved:
            raise ApplyError(f"{moved.message}; revert {commit[:12]} by hand") from None


def _move(repo: TargetRepo, old: str, new: str) -> None:
    """Move the ref old → new: a remote's by a push with a lease on `old`; a local one through
    the working tree when it is the branch checked out."""
    if repo.remote:
        _push(repo, f"{new}:refs/heads/{repo.ref}", lease=old)
        return
    checked_out = _git(repo.path, "symbolic-ref", "--quiet", "HEAD", ok=(0, 1))[1]
    if checked_out == f"refs/heads/{repo.ref}" and _has_worktree(repo):
        how = "--ff-only" if _is_ancestor(repo, old, new) else None
        if how:
            _out(repo.path, "merge", "--quiet", "--ff-only", new)
        else:
            _out(repo.path, "reset", "--quiet", "--keep", new)
        return
    _out(repo.path, "update-ref", f"refs/heads/{repo.ref}", new, old)


def _push(repo: TargetRepo, refspec: str, *, lease: str | None = None) -> None:
    """Push `refspec` (`<commit>:refs/heads/<branch>`) to the remote: plainly (a new branch, or
    the commit it already has), or with a lease (the branch must still be at `lease`). A
    refusal raises `ApplyError` saying where the remote's branch is now."""
    name = refspec.rpartition(":")[2]
    args = ["push", "--porcelain", "--no-verify", "origin", refspec]
    if lease is not None:
        args.insert(1, f"--force-with-lease={name}:{lease}")
    code, out = _git(repo.path, *args, ok=(0, 1), env=repo.remote_env)
    if code == 0:
        return
    refused = [line for line in out.splitlines() if line.startswith("!")]
    why = refused[0].rsplit("\t", 1)[-1] if refused else "refused"
    branch = name.removeprefix("refs/heads/")
    now = _remote_head(repo, name)
    if lease is not None and now != lease:
        raise RemoteMoved.of(repo, lease, now)
    advice = "" if lease is not None else "; delete that branch there or propose anew"
    raise ApplyError(
        f"{repo.where} refused the push of {branch} ({why}; it is at {(now or 'nothing')[:12]}): "
        f"nothing pushed{advice}"
    )


def _remote_head(repo: TargetRepo, name: str) -> str | None:
    out = _out(repo.path, "ls-remote", "origin", name, env=repo.remote_env)
    return out.split()[0] if out else None


class RemoteMoved(ApplyError):
    """The remote's ref is not where choird read it: the compare-and-swap refused the push."""

    @classmethod
    def of(cls, repo: TargetRepo, expected: str, now: str | None) -> RemoteMoved:
        return cls(
            f"{repo.ref} on {repo.where} moved while choird applied the proposal (it was "
            f"{expected[:12]}, now {(now or 'deleted')[:12]}): nothing pushed, {repo.ref} left "
            "as it is"
        )


def _locked(repo: TargetRepo) -> AbstractContextManager[None]:
    """A remote's clone is shared with builds and fetches (`repos.clone_lock`)."""
    return repos.clone_lock(repo.path) if repo.remote else nullcontext()


def _has_worktree(repo: TargetRepo) -> bool:
    return _out(repo.path, "rev-parse", "--is-inside-work-tree") == "true"


def _is_ancestor(repo: TargetRepo, older: str, newer: str) -> bool:
    return _git(repo.path, "merge-base", "--is-ancestor", older, newer, ok=(0, 1))[0] == 0


def _blob_at(repo: TargetRepo, commit: str, path: str) -> str | None:
    code, out = _git(repo.path, "rev-parse", "--verify", "--quiet", f"{commit}:{path}", ok=(0, 1))
    return out if code == 0 else None


def _hash_object(repo: TargetRepo, content: bytes, *, write: bool) -> str:
    args = ["hash-object", "--stdin", *(["-w"] if write else [])]
    return _out(repo.path, *args, stdin=content)


def _as(who: Identity) -> dict[str, str]:
    return {
        "GIT_AUTHOR_NAME": who.name,
        "GIT_AUTHOR_EMAIL": who.email,
        "GIT_COMMITTER_NAME": who.name,
        "GIT_COMMITTER_EMAIL": who.email,
    }


def _out(
    cwd: Path, *args: str, env: dict[str, str] | None = None, stdin: bytes | None = None
) -> str:
    return _git(cwd, *args, env=env, stdin=stdin)[1]


def _git(
    cwd: Path,
    *args: str,
    ok: tuple[int, ...] = (0,),
    env: dict[str, str] | None = None,
    stdin: bytes | None = None,
) -> tuple[int, str]:
    """Run git non-interactively, the operator's global config ignored; (exit code, stdout)."""
    full_env = git_env(**(env or {}))
    try:
        done = subprocess.run(
            ["git", *args],
            cwd=cwd,
            env=full_env,
            input=stdin,
            capture_output=True,
            timeout=GIT_TIMEOUT_S,
            check=False,
        )
    except FileNotFoundError:
        raise ApplyError("git is not installed on choird's host") from None
    except subprocess.TimeoutExpired:
        raise ApplyError(f"git {args[0]} took over {GIT_TIMEOUT_S:g} s in {cwd}") from None
    if done.returncode not in ok:
        lines = done.stderr.decode(errors="replace").strip().splitlines()
        last = display_url(lines[-1]) if lines else done.returncode
        raise ApplyError(f"git {args[0]} failed in {cwd}: {last}")
    return done.returncode, done.stdout.decode(errors="replace").strip()
