"""git-cred-helper: real git asks the helper, the helper asks choir-agent's credential socket.

Only https requests to the identity's allowed hosts get the token; nothing reaches disk or env.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from choir.agent.credentials import CredentialServer, GitCredential, parse_credential_request

TOKEN = "ghp_secret_token_123456"


@pytest.fixture
def helper(tmp_path: Path) -> Path:
    """`git-cred-helper` is choir-agent under another name (argv[0] dispatch)."""
    link = tmp_path / "bin" / "git-cred-helper"
    link.parent.mkdir()
    link.symlink_to(Path(sys.executable).parent / "choir-agent")
    return link


async def git_fill(
    helper: Path, socket: Path, url: str, home: Path
) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "GIT_TERMINAL_PROMPT": "0",
        "CHOIR_CRED_SOCKET": str(socket),
        "GIT_CONFIG_NOSYSTEM": "1",
    }
    process = await asyncio.create_subprocess_exec(
        "git",
        "-c",
        f"credential.helper={helper}",
        "credential",
        "fill",
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    out, err = await process.communicate(f"url={url}\n\n".encode())
    return subprocess.CompletedProcess([], process.returncode or 0, out.decode(), err.decode())


async def test_git_gets_the_token_for_an_allowed_host(helper: Path, tmp_path: Path) -> None:
    credential = GitCredential("x-access-token", TOKEN, ["github.com"])
    socket = tmp_path / "cred.sock"
    async with CredentialServer(socket, lambda: credential):
        assert oct(socket.stat().st_mode & 0o777) == oct(0o600)
        done = await git_fill(helper, socket, "https://github.com/org/repo.git", tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"password={TOKEN}" in done.stdout.splitlines()
    assert "username=x-access-token" in done.stdout.splitlines()


@pytest.mark.parametrize(
    "url", ["https://evil.example.com/org/repo.git", "http://github.com/org/repo.git"]
)
async def test_other_hosts_and_plain_http_get_nothing(
    helper: Path, tmp_path: Path, url: str
) -> None:
    credential = GitCredential("x-access-token", TOKEN, ["github.com"])
    socket = tmp_path / "cred.sock"
    async with CredentialServer(socket, lambda: credential):
        done = await git_fill(helper, socket, url, tmp_path)
    assert TOKEN not in done.stdout + done.stderr
    assert done.returncode != 0  # git has no credential and may not prompt


async def test_no_agent_listening_means_no_credential(helper: Path, tmp_path: Path) -> None:
    done = await git_fill(helper, tmp_path / "absent.sock", "https://github.com/a/b", tmp_path)
    assert "choir-agent is not answering" in done.stderr
    assert "password=" not in done.stdout


def test_the_protocol_parser_stops_at_the_blank_line() -> None:
    assert parse_credential_request("protocol=https\nhost=github.com\n\nignored=1\n") == {
        "protocol": "https",
        "host": "github.com",
    }


def test_the_token_is_not_in_the_repr() -> None:
    assert TOKEN not in repr(GitCredential("u", TOKEN, ["github.com"]))
