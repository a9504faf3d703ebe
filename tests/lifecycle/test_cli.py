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
    restart, bare = run("restart", "--help"), run()

    for done in (top, up, down, restart, bare):
        assert (done.returncode, done.stderr) == (0, "")
    for command in ("up", "down", "restart", "tui"):
        assert command in top.stdout
    assert top.stdout == bare.stdout
    for option in ("--home", "--agent", "--runtime", "--no-tui", "--json"):
        assert option in up.stdout
    assert "OPENROUTER_API_KEY" in up.stdout
    for option in ("--home", "--json"):
        assert option in down.stdout
        assert option in restart.stdout
    assert "adopts its agents, which keep running" in " ".join(restart.stdout.split())


def test_restart_without_a_choird_says_so_in_one_line(tmp_path: Path) -> None:
    done = run("restart", "--home", str(tmp_path / "nothing"))

    assert done.returncode == 6, done.stderr
    assert done.stderr == (
        f"choir restart: error: choird is not running on {tmp_path / 'nothing'}: "
        "choir up starts it\n"
    )


def test_tui_hands_its_arguments_to_the_console() -> None:
    done = run("tui", "--help")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: choir tui")
