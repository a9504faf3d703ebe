"""The few git operations `choirctl init` and `agent init` need, isolated from the user's git setup.

Commits are made as `choir <choir@localhost>` with the global and system git config ignored, so a
missing `user.email`, a signing requirement or a hooks path in ~/.gitconfig cannot break setup.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from choir.errors import ChoirError

BRANCH = "main"
_IDENTITY = ("-c", "user.name=choir", "-c", "user.email=choir@localhost")
NO_GIT = "git is not installed: install it (apt-get install git) and rerun"


def git_env(**extra: str) -> dict[str, str]:
    """The environment of every git choird runs: the operator's global and system config
    ignored, no prompt, and no optional lock. `git status` in the operator's own repo would
    otherwise rewrite its index under `index.lock`, and the operator's `git commit` at that
    moment would fail with "index.lock: File exists"."""
    env = dict(os.environ)
    env.update(
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_CONFIG_NOSYSTEM="1",
        GIT_TERMINAL_PROMPT="0",
        GIT_OPTIONAL_LOCKS="0",
        **extra,
    )
    return env


def git(cwd: Path, *args: str) -> str:
    """Run `git args` in `cwd`; a failure becomes a one-line `ChoirError`."""
    try:
        done = subprocess.run(
            ["git", *_IDENTITY, *args],
            cwd=cwd,
            env=git_env(),
            capture_output=True,
            text=True,
            check=True,
        )
    except FileNotFoundError:
        raise ChoirError(NO_GIT) from None
    except subprocess.CalledProcessError as err:
        reason = (err.stderr or err.stdout or "").strip().splitlines()
        detail = reason[-1] if reason else f"exit status {err.returncode}"
        raise ChoirError(f"git {args[0]} failed in {cwd}: {detail}") from None
    return done.stdout


def is_repo(path: Path) -> bool:
    """True when `path` is the top of a git work tree or a bare repository."""
    return (path / ".git").exists() or ((path / "HEAD").is_file() and (path / "objects").is_dir())


def init_with_commit(path: Path, message: str) -> str:
    """Make `path` (already holding files) a repository on `main` with one commit; its hash.

    `receive.denyCurrentBranch=updateInstead` lets choird push approved changes (§20) into this
    non-bare repository while keeping the operator's checkout in step.
    """
    git(path, "init", "--quiet", f"--initial-branch={BRANCH}")
    git(path, "config", "receive.denyCurrentBranch", "updateInstead")
    git(path, "add", "--all")
    git(path, "commit", "--quiet", "--no-verify", "--no-gpg-sign", "-m", message)
    return git(path, "rev-parse", "HEAD").strip()


def require_git() -> None:
    """Fail before touching anything when git is missing."""
    if shutil.which("git") is None:
        raise ChoirError(NO_GIT)
