"""The leased git identity, wired into the agent's git at start-up (§14.4).

Commits are attributable because git's *global* config in the agent's HOME names the identity
(user.name, user.email) — never the workspace's config, which the operator owns. Pushes and
fetches authenticate through `credential.helper`: a `git-cred-helper` symlink to this very
choir-agent, told on its command line where the credential socket is (tool subprocesses get a
minimal environment, so a variable would not reach it). The token stays in this process's memory:
the helper asks the socket, and only https requests to `ALLOWED_HOSTS` get an answer. A secrets
refresh swaps the credential the socket serves.

The socket and the symlink live in `$HOME/.choir` (0700): HOME is private to one agent, whereas
`/run` is shared by every agent of the process runtime.

An identity with an SSH key gets an ssh-agent holding it, and ssh pinned to the configured host
keys (`choir.agent.git_ssh`).

The repo the runtime gave the agent to clone (`$CHOIR_AGENT_REPO`, for `choir.propose.repo_change`)
is trusted (`safe.directory`): mounted read-only into a container that runs as the agent's own uid,
it belongs to another user, and git would refuse to clone it. Only the global config serves:
git gives a local clone's upload-pack none of the `-c` options.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import sys
import tempfile
from collections.abc import AsyncIterator, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any, Final

from choir.agent.credentials import CredentialServer, GitCredential
from choir.agent.git_ssh import ssh_files, ssh_key_loaded
from choir.agent.replication.live_config import DynamicState, Secrets
from choir.core.integrations import AGENT_REPO_ENV
from choir.logs import get_logger

log = get_logger("choir.agent.git")

ALLOWED_HOSTS: Final = frozenset({"github.com", "gitlab.com"})
"""The hosts the token is offered to when the identity names none (its `https_hosts`); any
other remote gets no credential (anti-phishing)."""
TOKEN_USERNAME: Final = "x-access-token"
"""The username sent with the token: GitHub and GitLab accept any name with a token."""
MAX_SOCKET_PATH: Final = 100
"""Unix socket paths are limited to 107 bytes; a longer HOME uses a private temp dir."""


def bound_identity(data: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The session's git identity (name, email, secret name) from the dynamic config blob."""
    bound = data.get("bound")
    identity = bound.get("git_identity") if isinstance(bound, Mapping) else None
    return identity if isinstance(identity, Mapping) else None


def identity_credential(state: DynamicState) -> GitCredential | None:
    """The credential for the current identity and secrets; None without a secret."""
    identity = bound_identity(state.current().data) or {}
    name = identity.get("secret")
    secrets: Secrets = state.secrets()
    if not isinstance(name, str) or name not in secrets.names():
        return None
    return GitCredential(TOKEN_USERNAME, secrets.reveal(name), https_hosts(identity))


def https_hosts(identity: Mapping[str, Any]) -> frozenset[str]:
    """The identity's `https_hosts` (validated by `config check`), else `ALLOWED_HOSTS`."""
    hosts = identity.get("https_hosts")
    if not isinstance(hosts, (list, tuple)):
        return ALLOWED_HOSTS
    return frozenset(host for host in hosts if isinstance(host, str))


def agent_executable() -> Path:
    """The running choir-agent (the helper symlink's target)."""
    invoked = Path(sys.argv[0])
    if invoked.name == "choir-agent" and invoked.exists():
        return invoked.absolute()
    return Path(sys.executable).parent / "choir-agent"


def private_dir(home: Path) -> Path:
    """`$HOME/.choir`, created 0700."""
    path = home / ".choir"
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    path.chmod(0o700)
    return path


def socket_path(private: Path) -> Path:
    """The credential socket: in `private`, or a fresh 0700 temp dir when that is too long."""
    path = private / "cred.sock"
    if len(str(path)) <= MAX_SOCKET_PATH:
        return path
    return Path(tempfile.mkdtemp(prefix="choir-cred-")) / "cred.sock"


def helper_link(private: Path) -> Path:
    """`private/bin/git-cred-helper` -> choir-agent (argv[0] dispatch)."""
    link = private / "bin" / "git-cred-helper"
    link.parent.mkdir(mode=0o700, exist_ok=True)
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(agent_executable())
    return link


GITCONFIG_ENV = "CHOIR_GITCONFIG"
"""Where the agent's git config lives; tool subprocesses get it as GIT_CONFIG_GLOBAL."""


def gitconfig_path(private: Path) -> Path:
    """The agent's own git config file: never the user's ~/.gitconfig, which may be a person's."""
    return private / "gitconfig"


async def git_config_global(config: Path, key: str, value: str) -> None:
    """`git config --file config --replace-all key value`; a failure is logged, not raised."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(config.parent)}
    try:
        process = await asyncio.create_subprocess_exec(
            *("git", "config", "--file", str(config), "--replace-all", key, value),
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
        _, err = await process.communicate()
    except OSError as error:
        log.warning("git is not available", fields={"key": key, "error": str(error)})
        return
    if process.returncode != 0:
        log.warning("git config failed", fields={"key": key, "error": err.decode().strip()})


_GIT_ESCAPES: Final = str.maketrans({"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t"})


def render_gitconfig(settings: Mapping[str, str]) -> str:
    """`section.key -> value` in git's config syntax, each value quoted (git-config(1): inside
    double quotes, backslash, quote, newline and tab are escaped; nothing else is special)."""
    sections: dict[str, list[str]] = {}
    for name, value in settings.items():
        section, key = name.split(".", 1)
        quoted = value.translate(_GIT_ESCAPES)
        sections.setdefault(section, []).append(f'\t{key} = "{quoted}"\n')
    return "".join(f"[{section}]\n" + "".join(lines) for section, lines in sections.items())


async def configure_git(config: Path, settings: Mapping[str, str]) -> None:
    """Set `settings` in the agent's git config. A fresh file (every container, a process
    agent's first start) is written at once — three `git config` processes cost the start
    ~20 ms; an existing one may hold what the agent's tools set with `git config --global`,
    so git itself replaces the keys there."""
    if not any("\0" in value for value in settings.values()):  # git refuses NUL: it says why
        try:
            fd = os.open(config, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            pass
        else:
            with os.fdopen(fd, "w", encoding="utf-8") as file:
                file.write(render_gitconfig(settings))
            return
    for key, value in settings.items():
        await git_config_global(config, key, value)


async def forget_ssh_command(config: Path) -> None:
    """Unset the `core.sshCommand` an earlier start with an SSH key left in the agent's git
    config (a process agent's HOME persists): its ssh-agent is gone. Read first, so a start
    without one spawns no git."""
    if not _mentions_ssh_command(config):
        return
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(config.parent)}
    process = await asyncio.create_subprocess_exec(
        *("git", "config", "--file", str(config), "--unset-all", "core.sshCommand"),
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    await process.wait()


def _mentions_ssh_command(config: Path) -> bool:
    try:
        return "sshcommand" in config.read_text(encoding="utf-8").lower()
    except OSError:
        return False


def git_dir(repo: Path) -> str:
    """The repository directory git checks a clone's source by: `.git` in a working tree, the
    repo itself when bare."""
    inside = repo / ".git"
    return str(inside if inside.is_dir() else repo)


@asynccontextmanager
async def git_identity(state: DynamicState, home: Path) -> AsyncIterator[Path]:
    """Configure git for the bound identity and serve its credential until exit; the socket."""
    private = private_dir(home)
    socket = socket_path(private)
    config = gitconfig_path(private)
    identity = bound_identity(state.current().data) or {}
    settings = {
        f"user.{key}": value
        for key in ("name", "email")
        if isinstance(value := identity.get(key), str)
    }
    helper = f"{shlex.quote(str(helper_link(private)))} --socket {shlex.quote(str(socket))}"
    settings["credential.helper"] = helper
    ssh = ssh_files(private, identity, max_socket=MAX_SOCKET_PATH)
    if ssh is not None:
        settings["core.sshCommand"] = ssh.command
    if repo := os.environ.get(AGENT_REPO_ENV):
        settings["safe.directory"] = git_dir(Path(repo))
    await configure_git(config, settings)
    if ssh is None:
        await forget_ssh_command(config)
    os.environ[GITCONFIG_ENV] = str(config)  # a path, not a secret: read by sandbox_env
    credential = identity_credential(state)

    def refresh(_: object) -> None:
        nonlocal credential
        credential = identity_credential(state)

    unsubscribe = state.subscribe_secrets(refresh)
    try:
        async with CredentialServer(socket, lambda: credential), AsyncExitStack() as stack:
            if ssh is not None:
                await stack.enter_async_context(ssh_key_loaded(state, ssh, identity))
            log.info("git identity configured", fields={"credential": credential is not None})
            yield socket
    finally:
        unsubscribe()
