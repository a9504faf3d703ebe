"""Every command explains itself, and choirctl starts without importing the config stack."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.ctl.cli import REPO_ROOT, choirctl


@pytest.mark.parametrize(
    ("args", "mentions"),
    [
        ((), ["init", "config", "secret", "agent"]),
        (("init",), ["--force", "--global-repo", "--json", "CHOIR_HOME"]),
        (("config",), ["check"]),
        (("config", "check"), ["--json", "every problem"]),
        (("secret",), ["set", "list", "delete"]),
        (("secret", "set"), ["stdin", "shell history"]),
        (("secret", "list"), ["--json", "never values"]),
        (("secret", "delete"), ["Delete a secret"]),
        (("agent",), ["init"]),
        (
            ("agent", "init"),
            [
                "--repo",
                "--workspace",
                "--llm",
                "--git-identity",
                "--dm",
                "--voice-profile",
                "--notion",
                "--email",
                "--json",
            ],
        ),
    ],
)
def test_help(tmp_path: Path, args: tuple[str, ...], mentions: list[str]) -> None:
    run = choirctl(tmp_path, *args, "--help")
    assert run.code == 0, run.err
    for word in mentions:
        assert word in run.out


def test_command_modules_import_nothing_heavy() -> None:
    probe = (
        "import sys\n"
        "import choir.ctl.init, choir.ctl.config, choir.ctl.secret, choir.ctl.agent.commands\n"
        "heavy = [m for m in ('pydantic', 'choir.config') if m in sys.modules]\n"
        "print(heavy)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[]"
