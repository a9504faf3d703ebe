"""Git over SSH with the identity's key held by an ssh-agent, against a real sshd (§14.4).

A real choird starts the real choir-agent on the process runtime (unsandboxed, so this test's
git can use the agent's HOME, as in test_git_identity). agent-1's identity names an SSH key
secret and pins two loopback sshd ports: the real server's host key for the first, and the same
key for the second — which presents another key (an impostor). Real git with the agent's git
config (`core.sshCommand`) then clones over SSH from the first with the key from secrets.json,
and is refused by the second before any key is offered. The key itself must appear in no file
under the agent's HOME, the workspace or the logs, and in no process environment; `ssh-add -l`
on the agent's socket lists it, a rotated key replaces it at `secret apply`, and stopping the
agent takes it away. The identity's own
`https_hosts` decide where its token goes.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path

import psutil
import pytest

from choir.client import ChoirClient
from choir.config.secret_store import SecretStore
from choir.daemon.runtimes.bwrap import BWRAP_ENV
from choir.home import ChoirHome
from choir.store.postgres.target import ConnectParams
from tests.e2e_agent.test_git_identity import files_containing, git
from tests.harness.agent_logs import agent_log_text
from tests.harness.daemons import poll_until, running_daemon
from tests.harness.homes import GIT_TOKEN, external_postgres, make_home, read_config, write_config
from tests.harness.sshd import bare_repo, git_sshd, key_fingerprint, keypair
from tests.security.process_agents import exec_script, process_agent

pytestmark = pytest.mark.slow


async def ssh_add_list(socket: Path) -> str:
    process = await asyncio.create_subprocess_exec(
        "ssh-add",
        "-l",
        env={"PATH": os.environ["PATH"], "SSH_AUTH_SOCK": str(socket)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    out, _ = await process.communicate()
    return out.decode()


def environments_holding(text: str) -> list[str]:
    """Processes whose initial environment holds `text` (every process this host shows)."""
    needle = text.encode()
    found = []
    for proc in psutil.process_iter(["pid", "name"]):
        try:
            environ = Path(f"/proc/{proc.pid}/environ").read_bytes()
        except OSError:
            continue
        if needle in environ:
            found.append(f"{proc.info['name']} ({proc.pid})")
    return found


def processes_mentioning(text: str) -> list[int]:
    """Live processes whose command line mentions `text`."""
    found = []
    for proc in psutil.process_iter(["pid", "cmdline", "status"]):
        cmdline = " ".join(proc.info.get("cmdline") or [])
        if text in cmdline and proc.info.get("status") != psutil.STATUS_ZOMBIE:
            found.append(int(proc.info["pid"]))
    return found


async def test_the_agent_clones_over_ssh_with_its_key_in_ssh_agent_and_refuses_an_impostor(
    root: Path, pg_params: ConnectParams, monkeypatch: pytest.MonkeyPatch
) -> None:
    (root / "keys").mkdir()
    public = keypair(root / "keys" / "id", "agent-1-deploy-key")
    private = (root / "keys" / "id").read_text()
    body = private.splitlines()[2]  # a line of the key's base64 body: what must leak nowhere
    fingerprint = key_fingerprint(root / "keys" / "id.pub")
    repo = bare_repo(root / "srv" / "repo.git")
    with git_sshd(root / "sshd", public) as server, git_sshd(root / "impostor", public) as other:
        home = make_home(root, postgres=external_postgres(pg_params))
        data = read_config(home)
        pinned = [server.known_hosts_line(), other.known_hosts_line(server.host_key)]
        data["git_identities"]["agent-1"].update(
            https_hosts=["git.example.org"], ssh_key_secret="git-ssh", ssh_known_hosts=pinned
        )
        write_config(home, data)
        SecretStore.load(home.secrets_file).with_secret("git-ssh", private).save(home.secrets_file)
        monkeypatch.setenv(BWRAP_ENV, "")
        async with running_daemon(home) as daemon, await ChoirClient.connect(home) as client:
            await client.agent_start("agent-1", {"dm": "console"})
            agent_home = daemon.home.root / "runtime" / "agent-1" / "home"
            socket = agent_home / ".choir" / "ssh-agent.sock"

            async def key_loaded() -> bool:
                return socket.is_socket() and "agent-1-deploy-key" in await ssh_add_list(socket)

            await poll_until(key_loaded, within=20, every=0.1)
            assert fingerprint in await ssh_add_list(socket)

            command = await git(agent_home, "config", "--global", "core.sshCommand")
            ssh_config = agent_home / ".choir" / "ssh_config"
            assert command.stdout.strip() == f"ssh -F {ssh_config}"
            assert "StrictHostKeyChecking yes" in ssh_config.read_text()
            known_hosts = (agent_home / ".choir" / "known_hosts").read_text()
            assert known_hosts == "".join(f"{line}\n" for line in pinned)

            cloned = await git(agent_home, "clone", "-q", server.url(repo), str(root / "c1"))
            assert cloned.returncode == 0, cloned.stderr
            log = await git(agent_home, "-C", str(root / "c1"), "log", "--format=%s")
            assert log.stdout.strip() == "over ssh"

            refused = await git(agent_home, "clone", "-q", other.url(repo), str(root / "c2"))
            assert refused.returncode != 0
            assert "Host key verification failed" in refused.stderr
            assert not (root / "c2").exists()

            token = await git(
                agent_home, "credential", "fill", stdin="url=https://git.example.org/r.git\n\n"
            )
            assert f"password={GIT_TOKEN}" in token.stdout.splitlines(), token.stderr
            github = await git(
                agent_home, "credential", "fill", stdin="url=https://github.com/r.git\n\n"
            )
            assert GIT_TOKEN not in github.stdout

            # a rotated key replaces the old one in ssh-agent at `secret apply`, no restart
            rotated = keypair(root / "keys" / "new", "agent-1-rotated-key")
            store = SecretStore.load(home.secrets_file)
            new_key = (root / "keys" / "new").read_text()
            store.with_secret("git-ssh", new_key).save(home.secrets_file)
            await client.secret_apply()

            async def rotated_in() -> bool:
                listed = await ssh_add_list(socket)
                return "agent-1-rotated-key" in listed and fingerprint not in listed

            await poll_until(rotated_in, within=20, every=0.1)
            assert rotated.endswith("agent-1-rotated-key")
            refused_old = await git(agent_home, "clone", "-q", server.url(repo), str(root / "c3"))
            assert refused_old.returncode != 0  # the server knows only the first key

            assert files_containing(agent_home, body) == []
            workspace = Path(data["workspaces"]["default"]["path"])
            assert files_containing(workspace, body) == []
            assert environments_holding(body) == []
            await client.agent_stop("agent-1")
            assert not socket.exists()
            assert processes_mentioning(str(socket)) == []  # ssh-agent went with the agent

            # the identity loses its key: the next start's git has no ssh command left over
            for key in ("ssh_key_secret", "ssh_known_hosts"):
                del data["git_identities"]["agent-1"][key]
            write_config(home, data)
            await client.config_load()
            await client.config_apply()
            await client.agent_start("agent-1", {"dm": "console"})
            await poll_until(lambda: (agent_home / ".choir" / "cred.sock").is_socket(), 20)
            left = await git(agent_home, "config", "--global", "core.sshCommand")
            assert (left.returncode, left.stdout) == (1, "")
            await client.agent_stop("agent-1")
        assert files_containing(daemon.home.logs, body) == []
        assert "SSH key loaded into ssh-agent" in agent_log_text(daemon.home, "agent-1")


async def test_the_agents_own_git_in_the_sandbox_clones_over_ssh_with_the_key_from_secrets(
    root: Path, pg_params: ConnectParams, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The agent's choir.exec in bwrap: its tool environment (SSH_AUTH_SOCK, GIT_SSH_COMMAND)
    reaches the ssh-agent choir-agent started in there, and git clones with the key."""
    (root / "keys").mkdir()
    public = keypair(root / "keys" / "id", "agent-1-deploy-key")
    private = (root / "keys" / "id").read_text()
    repo = bare_repo(root / "srv" / "repo.git")
    with git_sshd(root / "sshd", public) as server:

        def configure(home: ChoirHome) -> None:
            data = read_config(home)
            data["git_identities"]["agent-1"].update(
                ssh_key_secret="git-ssh", ssh_known_hosts=[server.known_hosts_line()]
            )
            write_config(home, data)
            store = SecretStore.load(home.secrets_file).with_secret("git-ssh", private)
            store.save(home.secrets_file)

        command = (
            f'{{ ssh-add -l | grep -c agent-1-deploy-key; echo "$GIT_SSH_COMMAND"; '
            f"git clone -q {server.url(repo)} c && git -C c log --format=%s; echo end; }} "
            "> ssh.txt 2>&1; echo ssh-done"
        )
        script = exec_script(command, done="ssh-done")
        async with process_agent(
            root, pg_params, script, sandbox="bwrap", monkeypatch=monkeypatch, configure=configure
        ) as agent:
            await agent.start_worker()
            answer = agent.workspace / "ssh.txt"
            await poll_until(lambda: answer.exists() and answer.read_text().endswith("end\n"), 30)
            lines = answer.read_text().splitlines()
            assert lines[0] == "1", lines
            assert lines[1].startswith("ssh -F "), lines
            assert lines[2:] == ["over ssh", "end"], lines
            await agent.client.agent_stop("agent-1")
