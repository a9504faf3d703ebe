"""The agent's git config written directly (a fresh file) reads back in real git exactly as
`git config` would have set it; an existing file keeps what else it holds."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from choir.agent.git_identity import configure_git

AWKWARD = [
    "Ada Lovelace",
    'Ada "the Countess" Lovelace',
    "back\\slash and trailing space ",
    " leading; semicolon # hash",
    "tab\there, newline\nthere",
    "Zoë Ünïcödé 名前",
    "'/home/a b/.choir/bin/git-cred-helper' --socket '/home/a b/.choir/cred.sock'",
]


def git_get(config: Path, key: str) -> str:
    done = subprocess.run(
        ["git", "config", "--file", str(config), "--get", key],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.removesuffix("\n")


def git_set(config: Path, key: str, value: str) -> None:
    subprocess.run(["git", "config", "--file", str(config), key, value], check=True)


@pytest.mark.parametrize("value", AWKWARD)
async def test_git_reads_back_what_was_written(tmp_path: Path, value: str) -> None:
    config = tmp_path / "gitconfig"
    settings = {"user.name": value, "user.email": "a@b.c", "credential.helper": value}
    await configure_git(config, settings)
    assert {key: git_get(config, key) for key in settings} == settings
    assert config.stat().st_mode & 0o777 == 0o600


async def test_an_existing_config_keeps_its_other_settings(tmp_path: Path) -> None:
    """The agent's tools may have run `git config --global` (GIT_CONFIG_GLOBAL is this file)
    in an earlier session: a restart replaces choir's keys and nothing else."""
    config = tmp_path / "gitconfig"
    await configure_git(config, {"user.name": "Old Name", "credential.helper": "old"})
    git_set(config, "core.editor", "vi")
    await configure_git(config, {"user.name": "New Name", "credential.helper": "new"})
    assert git_get(config, "user.name") == "New Name"
    assert git_get(config, "credential.helper") == "new"
    assert git_get(config, "core.editor") == "vi"


async def test_a_fresh_config_is_written_without_running_git(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every container and a process agent's first start: no `git config` process (they cost
    the start ~20 ms) — with no git on PATH, the file is there all the same."""
    config = tmp_path / "gitconfig"
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    await configure_git(config, {"user.name": "Ada", "credential.helper": "helper"})
    monkeypatch.undo()
    assert git_get(config, "user.name") == "Ada"
