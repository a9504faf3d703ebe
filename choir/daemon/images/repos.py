"""The global and per-agent repos (§6.5): local paths read in place, URLs cloned and fetched.

A repo's `url` is either a local directory (an absolute path: its working tree is read as it is,
uncommitted changes included and marked `+dirty`) or any git URL (`file://`, `https://`, `ssh://`,
`git@host:path`), cloned into choird's cache — `$CHOIR_HOME/repos/global` and
`$CHOIR_HOME/repos/agents/<agent-id>` — and checked out at the configured `ref` (a branch of the
remote, a tag or a commit). The operator never edits the clones.

`config load`, choird's start and `agent build` fetch. A failed fetch (unreachable remote, auth)
is a warning, not an error: the existing clone is used and flagged stale until a fetch succeeds;
the flag and the last error live in `repos/state.json`, which `status` shows. Git never prompts
(no terminal, ssh in batch mode) and each fetch is bounded by `FETCH_TIMEOUT_S`.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final
from urllib.parse import unquote

from choir.config import ChoirConfig
from choir.config.model import RepoRef
from choir.config.scaffolding.gitrepo import git_env
from choir.daemon.images.agent_tree import commit_of
from choir.errors import ChoirError, UsageError
from choir.home import ChoirHome
from choir.logs import get_logger

log = get_logger("choird.repos")

FETCH_TIMEOUT_S: Final = 60.0
"""A clone or fetch taking longer is abandoned (and counts as a failed fetch)."""
GLOBAL: Final = "global"
"""The repo key of the global repo; agent repos are keyed `agents/<agent-id>`."""
REMOTE_ENV: Final = {
    "GIT_ASKPASS": "",
    "SSH_ASKPASS": "",
    "GIT_SSH_COMMAND": "ssh -o BatchMode=yes -o ConnectTimeout=10",
    "GIT_HTTP_LOW_SPEED_LIMIT": "1",
    "GIT_HTTP_LOW_SPEED_TIME": "30",
}
"""What a git talking to a remote (a fetch, an apply's push) runs with, over `git_env`: never a
prompt (ssh in batch mode, no askpass), a stalled transfer abandoned."""
_CREDENTIAL_HELPER: Final = (
    '!f() { test "$1" = get || exit 0; host=; while read -r line && test -n "$line"; do '
    'case "$line" in host=*) host="${line#host=}";; esac; done; '
    'test "$host" = "$CHOIR_GIT_HOST" || exit 0; printf "username=%s\\n" "$CHOIR_GIT_USERNAME"; '
    'test -z "$CHOIR_GIT_PASSWORD" || printf "password=%s\\n" "$CHOIR_GIT_PASSWORD"; }; f'
)
"""A credential helper answering git from the environment it runs with, for the URL's own host
only (a redirect elsewhere gets nothing)."""
_HTTP_USERINFO: Final = re.compile(
    r"^https?://(?P<user>[^/@:]*)(?::(?P<password>[^/@]*))?@(?P<host>[^/?#]*)"
)
_SCP_LIKE: Final = re.compile(r"^[\w.-]+@[\w.-]+:")
_USERINFO: Final = re.compile(r"(?<=://)[^/@]+@")
_locks: dict[Path, threading.RLock] = {}
_locks_guard = threading.Lock()


@dataclass(frozen=True)
class RepoCheckout:
    """A repo ready to read: where its tree is and at which commit."""

    key: str
    """`global` or `agents/<agent-id>`."""
    url: str
    """As configured (shown with any password removed)."""
    ref: str
    path: Path
    """The working tree: the local directory itself, or the clone in the cache."""
    commit: str
    """Full commit hash, `+dirty` for a local tree with uncommitted changes."""
    local: bool
    stale: bool = False
    """The last fetch failed; the tree is the clone's previous checkout."""
    warning: str | None = None
    """Why it is stale, one line."""


def repo_key(agent_id: str | None) -> str:
    return GLOBAL if agent_id is None else f"agents/{agent_id}"


def clone_path(home: ChoirHome, key: str) -> Path:
    return home.repos / key


def is_local(url: str) -> bool:
    """True for a filesystem path (used in place), False for a URL to clone."""
    return not ("://" in url or _SCP_LIKE.match(url))


def remote_env(url: str) -> dict[str, str]:
    """What git talking to `url` runs with, over `git_env`: `REMOTE_ENV`, and the user and
    password an https URL carries, handed to git by a credential helper from its environment.
    git is given the URL without them (`display_url`), so a token is never on a command line,
    which any user of the host can read (`ps`), nor in the clone's config."""
    env = dict(REMOTE_ENV)
    found = _HTTP_USERINFO.match(url)
    if found is None:
        return env
    return env | {
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": "credential.helper",
        "GIT_CONFIG_VALUE_0": _CREDENTIAL_HELPER,
        "CHOIR_GIT_HOST": found["host"],
        "CHOIR_GIT_USERNAME": unquote(found["user"]),
        "CHOIR_GIT_PASSWORD": unquote(found["password"] or ""),
    }


def display_url(url: str) -> str:
    """`url` without user info, so a token in an https URL never reaches a message or log."""
    return _USERINFO.sub("", url)


def checkout(home: ChoirHome, key: str, repo: RepoRef, *, fetch: bool = True) -> RepoCheckout:
    """The repo `key` ready to read: a local tree as it is, a URL cloned/fetched and checked
    out at `repo.ref`. Raises `UsageError` when there is nothing usable (an empty URL, a missing
    directory, a remote never cloned and unreachable, an unknown ref)."""
    field = "global_repo.url" if key == GLOBAL else f"{key.replace('/', '.')}.repo.url"
    url = repo.url.strip()
    if not url:
        raise UsageError(f"{field} is empty: set it to a git URL or a local repository path")
    if is_local(url):
        return _local(key, url, repo.ref, field)
    with clone_lock(clone_path(home, key)):
        return _cached(home, key, RepoRef(url=url, ref=repo.ref), field, fetch=fetch)


def checkouts(home: ChoirHome, config: ChoirConfig) -> tuple[list[RepoCheckout], list[str]]:
    """Fetch every configured repo (global first): the usable ones and one warning per problem.

    Never raises for a repo: `config load` and choird's start report and carry on.
    """
    wanted: list[tuple[str, RepoRef]] = [(GLOBAL, config.global_repo)]
    wanted += [(repo_key(agent_id), agent.repo) for agent_id, agent in config.agents.items()]
    found: list[RepoCheckout] = []
    warnings: list[str] = []
    for key, repo in wanted:
        if not repo.url.strip():
            continue  # placeholders are already a config warning
        try:
            done = checkout(home, key, repo)
        except ChoirError as error:
            warnings.append(f"repo {key}: {error.message}")
            continue
        found.append(done)
        if done.warning:
            warnings.append(f"repo {key}: {done.warning}")
    return found, warnings


def at_commit(repo: RepoRef, commit: str) -> RepoRef:
    """`repo` checked out at `commit`: a local tree is then cloned into the cache like a URL,
    since its working tree holds only its current state."""
    url = repo.url.strip()
    if is_local(url):
        url = Path(url).expanduser().as_uri()
    return RepoRef(url=url, ref=commit)


def commit_named(home: ChoirHome, key: str, repo: RepoRef, rev: str) -> str | None:
    """The full commit `rev` names in the repo (a local tree as it is, a URL's clone after a
    fetch); None when it names none. UsageError when the repo cannot be read at all."""
    path = checkout(home, key, repo).path
    try:
        found = _git(path, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    except ChoirError:
        return None
    return found.strip() or None


@contextmanager
def clone_lock(path: Path) -> Iterator[None]:
    """Serialise work on one clone across threads (a fetch while a build reads it)."""
    with _locks_guard:
        lock = _locks.setdefault(path, threading.RLock())
    with lock:
        yield


def repo_states(home: ChoirHome) -> dict[str, dict[str, Any]]:
    """`repos/state.json`: per cloned repo, its URL, ref, commit, last fetch and staleness."""
    try:
        data = json.loads((home.repos / "state.json").read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _local(key: str, url: str, ref: str, field: str) -> RepoCheckout:
    path = Path(url).expanduser()
    if not path.is_absolute():
        raise UsageError(f"{field} {url!r} is a relative path: make it absolute")
    if not path.is_dir():
        raise UsageError(
            f"{field} {url!r} is not a directory: create the repository or fix the path"
        )
    return RepoCheckout(key, url, ref, path, commit_of(path), local=True)


def _cached(home: ChoirHome, key: str, repo: RepoRef, field: str, *, fetch: bool) -> RepoCheckout:
    """`repo` from the cache: cloned when missing, fetched when asked, checked out at its ref;
    `field` names the URL's place in config.json for error messages."""
    url, ref = repo.url, repo.ref
    path = clone_path(home, key)
    shown = display_url(url)
    fresh = not (path / ".git").is_dir()
    error = None
    if fresh:
        try:
            _clone(url, path)
        except ChoirError as failed:
            _record(home, key, shown, ref, None, failed.message)
            raise UsageError(
                f"{field} {shown} cannot be cloned ({failed.message}): fix the URL or the "
                "remote's access"
            ) from None
    elif fetch:
        error = _fetch(path, url)
    commit = _check_out(path, ref, f"{field.removesuffix('.url')}.ref", shown)
    if fresh or fetch:
        _record(home, key, shown, ref, commit, error)
        stale = error is not None
    else:
        stale = bool(repo_states(home).get(key, {}).get("stale"))
    warning = None
    if error is not None:
        warning = f"fetch from {shown} failed ({error}); using the stale clone at {commit[:7]}"
        log.warning("repo fetch failed", fields={"repo": key, "url": shown, "error": error})
    return RepoCheckout(key, shown, ref, path, commit, False, stale, warning)


def _fetch(path: Path, url: str) -> str | None:
    """Fetch every branch and tag of `url` into the clone; the error, or None."""
    try:
        _git(path, "remote", "set-url", "origin", display_url(url))
        _git(
            path, "fetch", "--quiet", "--prune", "--tags", "--force", "origin", env=remote_env(url)
        )
    except ChoirError as error:
        return error.message
    return None


def _clone(url: str, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = path.with_name(f".{path.name}.cloning")
    shutil.rmtree(staging, ignore_errors=True)
    try:
        shown, env = display_url(url), remote_env(url)
        _git(path.parent, "clone", "--quiet", "--no-checkout", "--", shown, str(staging), env=env)
        shutil.rmtree(path, ignore_errors=True)
        staging.rename(path)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _check_out(path: Path, ref: str, field: str, shown: str) -> str:
    """Check out `ref` (a remote branch, a tag or a commit) detached; its commit."""
    for candidate in (f"refs/remotes/origin/{ref}", f"refs/tags/{ref}", ref):
        try:
            commit = _git(path, "rev-parse", "--verify", "--quiet", f"{candidate}^{{commit}}")
        except ChoirError:
            continue
        _git(path, "checkout", "--quiet", "--force", "--detach", commit.strip())
        _git(path, "clean", "-ffdxq")
        return commit.strip()
    raise UsageError(f"{field} {ref!r} is not a branch, tag or commit of {shown}: fix it")


def _record(
    home: ChoirHome, key: str, url: str, ref: str, commit: str | None, error: str | None
) -> None:
    """Update `repos/state.json` for `key` (atomically; readers never see half a file)."""
    with _locks_guard:
        states = repo_states(home)
        previous = states.get(key, {})
        now = time.time()
        states[key] = {
            "url": url,
            "ref": ref,
            "commit": commit or previous.get("commit"),
            "stale": error is not None,
            "error": error,
            "fetched_at": previous.get("fetched_at") if error else now,
            "checked_at": now,
        }
        home.repos.mkdir(parents=True, exist_ok=True)
        staging = home.repos / ".state.json.tmp"
        staging.write_text(json.dumps(states, indent=2, sort_keys=True) + "\n")
        staging.replace(home.repos / "state.json")


def _git(cwd: Path, *args: str, env: dict[str, str] | None = None) -> str:
    """Run git non-interactively with the operator's global config ignored; one-line errors.
    `env` (`remote_env`) for a command that reaches the remote."""
    env = git_env(**(env or REMOTE_ENV))
    try:
        done = subprocess.run(
            ["git", "-c", "advice.detachedHead=false", *args],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=FETCH_TIMEOUT_S,
            check=True,
        )
    except FileNotFoundError:
        raise ChoirError("git is not installed: install it (apt-get install git)") from None
    except subprocess.TimeoutExpired:
        raise ChoirError(f"git {args[0]} timed out after {FETCH_TIMEOUT_S:.0f} s") from None
    except subprocess.CalledProcessError as error:
        raise ChoirError(_reason(error.stderr or error.stdout or "", args[0])) from None
    return done.stdout


def _reason(output: str, command: str) -> str:
    """git's own one-line reason: its first `fatal:`/`error:` line, else its last line."""
    lines = [line.strip() for line in display_url(output).strip().splitlines() if line.strip()]
    for line in lines:
        for prefix in ("fatal:", "error:"):
            if line.startswith(prefix):
                return line.removeprefix(prefix).strip()
    return lines[-1] if lines else f"git {command} failed"
