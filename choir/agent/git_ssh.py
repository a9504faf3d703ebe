"""Git over SSH with the identity's key in an ssh-agent, never in a file (§14.4 point 4).

When the bound git identity names an `ssh_key_secret`, choir-agent starts its own `ssh-agent`
(a child, listening on a socket in `$HOME/.choir`, 0700) and feeds it the key on stdin with
`ssh-add -`: the key goes from choird's GET_SECRETS answer to ssh-agent's memory (ssh-agent
makes itself non-dumpable) through a pipe, and exists in no file, no environment and no log. A
secrets refresh replaces it the same way.

Which servers the key may be used with is pinned in config (`ssh_known_hosts`): choir writes
those lines to `$HOME/.choir/known_hosts` and an ssh config that makes every ssh git starts use
that file alone with `StrictHostKeyChecking yes` — an unknown or changed host key is refused,
never learnt — and talk to this agent only (`IdentityAgent`). Git gets it as `core.sshCommand`
in the agent's git config and, for tool subprocesses, `GIT_SSH_COMMAND`; `SSH_AUTH_SOCK` is
their one other variable (a path: what `ssh-add -l` needs).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import tempfile
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from choir.agent.replication.live_config import DynamicState
from choir.logs import get_logger

log = get_logger("choir.agent.git")

AUTH_SOCK_ENV: Final = "CHOIR_SSH_AUTH_SOCK"
"""Where ssh-agent listens; tool subprocesses get it as SSH_AUTH_SOCK (`sandbox_env`)."""
SSH_COMMAND_ENV: Final = "CHOIR_GIT_SSH_COMMAND"
"""The ssh command git uses; tool subprocesses get it as GIT_SSH_COMMAND (`sandbox_env`)."""
READY_WITHIN_S: Final = 5.0
"""How long ssh-agent may take to create its socket (it takes milliseconds)."""
ADD_WITHIN_S: Final = 10.0
"""How long `ssh-add` may take (an RSA key is checked in well under a second)."""


@dataclass(frozen=True)
class SshFiles:
    """The agent's ssh set-up, all in its private `$HOME/.choir`."""

    config: Path
    known_hosts: Path
    agent_socket: Path

    @property
    def command(self) -> str:
        """The ssh command for git: this config and nothing of the user's `~/.ssh/config`."""
        return f"ssh -F {shlex.quote(str(self.config))}"


def ssh_key_secret(identity: Mapping[str, Any]) -> str | None:
    """The identity's SSH key secret name, if it has one."""
    name = identity.get("ssh_key_secret")
    return name if isinstance(name, str) and name else None


def known_hosts_text(identity: Mapping[str, Any]) -> str:
    """The identity's pinned host keys as a known_hosts file (validated by `config check`)."""
    lines = identity.get("ssh_known_hosts")
    if not isinstance(lines, (list, tuple)):
        return ""
    return "".join(f"{line.strip()}\n" for line in lines if isinstance(line, str))


def render_ssh_config(files: SshFiles) -> str:
    """Every host: only the pinned keys, strictly; only this agent's keys; never a prompt."""
    quoted = {name: f'"{path}"' for name, path in vars(files).items()}
    return (
        "Host *\n"
        f"\tIdentityAgent {quoted['agent_socket']}\n"
        f"\tUserKnownHostsFile {quoted['known_hosts']}\n"
        "\tGlobalKnownHostsFile /dev/null\n"
        "\tStrictHostKeyChecking yes\n"
        "\tUpdateHostKeys no\n"
        "\tCheckHostIP no\n"
        "\tBatchMode yes\n"
        "\tPasswordAuthentication no\n"
        "\tKbdInteractiveAuthentication no\n"
    )


def write_private(path: Path, text: str) -> None:
    """`text` to `path`, mode 0600 (replacing what a previous start wrote)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as file:
        file.write(text)
    path.chmod(0o600)


def write_ssh_files(files: SshFiles, identity: Mapping[str, Any]) -> None:
    """The known_hosts file and the ssh config; `sandbox_env` reads their paths from env."""
    write_private(files.known_hosts, known_hosts_text(identity))
    write_private(files.config, render_ssh_config(files))
    os.environ[AUTH_SOCK_ENV] = str(files.agent_socket)  # paths, not secrets
    os.environ[SSH_COMMAND_ENV] = files.command


def _tool_env(socket: Path) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "SSH_AUTH_SOCK": str(socket),
        "SSH_ASKPASS_REQUIRE": "never",  # a key with a passphrase fails; it never prompts
    }


class SshAgent:
    """`ssh-agent -D` as a child of choir-agent, holding at most the identity's one key."""

    def __init__(self, socket: Path) -> None:
        self.socket = socket
        self._process: asyncio.subprocess.Process | None = None
        self._loading = asyncio.Lock()

    async def start(self) -> None:
        """Start ssh-agent and wait for its socket; OSError when it cannot run."""
        with contextlib.suppress(FileNotFoundError):
            self.socket.unlink()
        self._process = await asyncio.create_subprocess_exec(
            *("ssh-agent", "-D", "-a", str(self.socket)),
            env=_tool_env(self.socket),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        try:
            async with asyncio.timeout(READY_WITHIN_S):
                while not self.socket.is_socket():
                    if self._process.returncode is not None:
                        raise OSError(f"ssh-agent exited with code {self._process.returncode}")
                    await asyncio.sleep(0.01)
        except TimeoutError:
            await self.close()
            raise OSError(f"ssh-agent made no socket within {READY_WITHIN_S:g} s") from None
        except BaseException:
            await self.close()
            raise

    async def close(self) -> None:
        """Stop ssh-agent (the key goes with its memory) and remove its socket."""
        process, self._process = self._process, None
        if process is not None and process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.terminate()
            await process.wait()
        with contextlib.suppress(FileNotFoundError):
            self.socket.unlink()

    async def load(self, key: str) -> str | None:
        """Replace the agent's keys with `key` (`ssh-add -D`, then `ssh-add -` reading it on
        stdin); None when it is in, else why not (ssh-add's words, which never hold the key)."""
        text = key if key.endswith("\n") else key + "\n"  # OpenSSH wants the final newline
        async with self._loading:  # two refreshes in a row: one key at a time, the last wins
            await self._ssh_add("-D", stdin=b"")
            return await self._ssh_add("-q", "-", stdin=text.encode())

    async def _ssh_add(self, *args: str, stdin: bytes) -> str | None:
        try:
            process = await asyncio.create_subprocess_exec(
                "ssh-add",
                *args,
                env=_tool_env(self.socket),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,  # no terminal to ask a passphrase on
            )
        except OSError as error:
            return f"ssh-add did not run: {error.strerror or error}"
        try:
            async with asyncio.timeout(ADD_WITHIN_S):
                _, err = await process.communicate(stdin)
        except TimeoutError:
            process.kill()
            await process.wait()
            return f"ssh-add did not finish within {ADD_WITHIN_S:g} s"
        if process.returncode == 0:
            return None
        return err.decode(errors="replace").strip() or f"ssh-add exited {process.returncode}"


def ssh_files(private: Path, identity: Mapping[str, Any], *, max_socket: int) -> SshFiles | None:
    """Where the ssh set-up goes when the identity has an SSH key; None without one. The
    socket moves to a fresh 0700 temp dir when `private` makes its path too long."""
    if ssh_key_secret(identity) is None:
        return None
    agent_socket = private / "ssh-agent.sock"
    if len(str(agent_socket)) > max_socket:
        agent_socket = Path(tempfile.mkdtemp(prefix="choir-ssh-")) / "agent.sock"
    return SshFiles(private / "ssh_config", private / "known_hosts", agent_socket)


@asynccontextmanager
async def ssh_key_loaded(
    state: DynamicState, files: SshFiles, identity: Mapping[str, Any]
) -> AsyncIterator[None]:
    """ssh-agent running with the identity's key (reloaded at every secrets refresh) and the
    pinned known_hosts written. A key ssh-add refuses is logged — the agent runs on, and git
    over SSH fails with ssh's own message — never fatal and never shown."""
    name = ssh_key_secret(identity)
    assert name is not None
    write_ssh_files(files, identity)
    loads: set[asyncio.Task[None]] = set()

    async def load(agent: SshAgent) -> None:
        secrets = state.secrets()
        if name not in secrets.names():
            log.warning("the SSH key secret is not available", fields={"secret": name})
            return
        problem = await agent.load(secrets.reveal(name))
        if problem is not None:
            log.warning("ssh-add refused the SSH key", fields={"secret": name, "error": problem})
        else:
            log.info("SSH key loaded into ssh-agent", fields={"secret": name})

    def reload(_: object) -> None:
        task = asyncio.get_running_loop().create_task(load(agent))
        loads.add(task)
        task.add_done_callback(loads.discard)

    agent = SshAgent(files.agent_socket)
    try:
        await agent.start()
    except OSError as error:
        log.warning("ssh-agent could not start: git over SSH fails", fields={"error": str(error)})
        yield
        return
    unsubscribe = state.subscribe_secrets(reload)
    try:
        await load(agent)
        yield
    finally:
        unsubscribe()
        for task in list(loads):
            task.cancel()
        await asyncio.gather(*loads, return_exceptions=True)
        await agent.close()
