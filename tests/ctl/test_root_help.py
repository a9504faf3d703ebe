"""`choirctl --help` prints the page typer would, without typer or any noun module (speed)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys

import pytest

from .cli import REPO_ROOT

ENTRY = (
    "import sys; sys.argv[0] = 'choirctl'; from choir.ctl.{module} import {function}; {function}()"
)


def choirctl(
    module: str, function: str, *args: str, columns: int = 80
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": str(columns), "PYTHONPATH": str(REPO_ROOT)}
    return subprocess.run(
        [sys.executable, "-c", ENTRY.format(module=module, function=function), *args],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=60,
    )


@pytest.mark.parametrize("args", [["--help"], ["-h"], []], ids=["--help", "-h", "no arguments"])
@pytest.mark.parametrize("columns", [80, 200])
def test_the_static_page_is_the_one_typer_prints(args: list[str], columns: int) -> None:
    fast = choirctl("app", "main", *args, columns=columns)
    typer = choirctl("tree", "run", *args, columns=columns)
    assert typer.returncode == (0 if args else 2)
    assert (fast.returncode, fast.stdout, fast.stderr) == (
        typer.returncode,
        typer.stdout,
        typer.stderr,
    ), "a noun's help changed: update choir/ctl/root_help.py (NOUNS or ROOT_HELP) to match"


def test_a_narrow_terminal_gets_typer_s_own_wrapping() -> None:
    fast = choirctl("app", "main", "--help", columns=60)
    typer = choirctl("tree", "run", "--help", columns=60)
    assert fast.stdout == typer.stdout
    assert max(len(line) for line in fast.stdout.splitlines()) <= 58


def test_root_help_imports_neither_typer_nor_a_noun_module() -> None:
    probe = (
        "import sys\nsys.argv = ['choirctl', '--help']\nfrom choir.ctl.app import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m in ('typer', 'click', 'choir.ctl.tree')"
        " or m.startswith('choir.ctl.') and m not in ('choir.ctl.app', 'choir.ctl.root_help')),"
        " file=sys.stderr)\n"
    )
    env = {**os.environ, "COLUMNS": "80", "PYTHONPATH": str(REPO_ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=env, check=True
    )
    assert ast.literal_eval(done.stderr.strip()) == []
