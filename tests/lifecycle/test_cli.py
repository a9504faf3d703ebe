"""`choir` itself: its help is accurate, and `choir tui` hands over to the console."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

CHOIR = Path(sys.executable).parent / "choir"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(CHOIR), *args], capture_output=True, text=True, timeout=60, check=False
    )


def test_help_names_every_command_and_option() -> None:
    top, up, down = run("--help"), run("up", "--help"), run("down", "--help")
    bare = run()

    for done in (top, up, down, bare):
        assert (done.returncode, done.stderr) == (0, "")
    for command in ("up", "down", "tui"):
        assert command in top.stdout
    assert top.stdout == bare.stdout
    for option in ("--home", "--agent", "--runtime", "--no-tui", "--json"):
        assert option in up.stdout
    assert "OPENROUTER_API_KEY" in up.stdout
    for option in ("--home", "--json"):
        assert option in down.stdout


def test_tui_hands_its_arguments_to_the_console() -> None:
    done = run("tui", "--help")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: choir tui")
