"""The SSH key in an agent container: in its ssh-agent, nowhere else (§14.4, §15.2).

A real choird on the docker runtime starts agent-1 in its hardened container (every capability
dropped, read-only root, no new privileges) with an identity that names an SSH key secret and a
pinned host. Inside the container, as the agent's uid: `ssh-add -l` on the agent's socket lists
the key (the image's openssh-client runs under the profile), the known_hosts file holds exactly
the pinned line, git's `core.sshCommand` names choir's ssh config, and the key's text is in no
writable file (`/tmp`, `/workspace`, `/run` but its traverse-only socket directory) and not in
the container's environment. A clone over SSH from the container is not tried: the choir
network's egress filter keeps containers off the host's loopback sshd
(tests/e2e_agent/test_git_ssh.py clones from the process runtime).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import docker
import pytest

from choir.config.secret_store import SecretStore
from choir.home import ChoirHome
from choir.store.postgres.target import ConnectParams
from tests.harness.daemons import poll_until
from tests.harness.homes import external_postgres, make_home, read_config, write_config
from tests.harness.sshd import keypair
from tests.runtime.conftest import Choird, containers_of

pytestmark = pytest.mark.slow

PINNED = (
    "[git.example.com]:2222 ssh-ed25519 "
    "AAAAC3NzaC1lZDI1NTE5AAAAIKbe1efRlfpdnuHj/ShBx+xGxBX+GlSL3rfNNKRkP3jK"
)
CHOIR_DIR = "/tmp/home/.choir"


@pytest.fixture
def home(root: Path, pg_params: ConnectParams) -> ChoirHome:
    home = make_home(root, postgres=external_postgres(pg_params))
    (root / "keys").mkdir()
    keypair(root / "keys" / "id", "agent-1-deploy-key")
    data = read_config(home)
    data["git_identities"]["agent-1"].update(ssh_key_secret="git-ssh", ssh_known_hosts=[PINNED])
    write_config(home, data)
    key = (root / "keys" / "id").read_text()
    SecretStore.load(home.secrets_file).with_secret("git-ssh", key).save(home.secrets_file)
    return home


async def in_container(container: Any, script: str) -> tuple[int, str]:
    """`sh -c script` by `docker exec` (the container's own user) in a thread."""
    done = await asyncio.to_thread(container.exec_run, ["sh", "-c", script])
    return done.exit_code, done.output.decode(errors="replace")


async def test_the_key_is_in_the_containers_ssh_agent_and_nowhere_else(
    choird: Choird, engine: docker.DockerClient, root: Path
) -> None:
    await choird.start()
    (container,) = containers_of(engine, choird.home)
    listing = f"SSH_AUTH_SOCK={CHOIR_DIR}/ssh-agent.sock ssh-add -l"

    async def key_listed() -> bool:
        return "agent-1-deploy-key" in (await in_container(container, listing))[1]

    await poll_until(key_listed, within=30, every=0.2)
    code, known_hosts = await in_container(container, f"cat {CHOIR_DIR}/known_hosts")
    assert (code, known_hosts) == (0, PINNED + "\n")
    code, command = await in_container(
        container, f"git config --file {CHOIR_DIR}/gitconfig core.sshCommand"
    )
    assert (code, command.strip()) == (0, f"ssh -F {CHOIR_DIR}/ssh_config")

    body = (root / "keys" / "id").read_text().splitlines()[2]
    code, found = await in_container(
        container, f"grep -rlF --exclude-dir=choir '{body}' /tmp /run /workspace"
    )
    assert code == 1, found  # 1: no file holds it
    container.reload()
    assert not any(body in variable for variable in container.attrs["Config"]["Env"])
    await choird.client.agent_stop("agent-1")
