"""Import boundaries of the console (STYLE.md "A layout that shows the architecture").

- Nothing in `choir/` imports Textual: `choirctl` and `choir --help` stay fast and never load
  it (only `choir tui` does, lazily).
- `tui/` reaches choird only through `choir.client` and the pure packages: it never imports
  the store, the adapters, the daemon or the agent — the console is a client like choirctl.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FORBIDDEN_IN_TUI = ("choir.store", "choir.adapters", "choir.daemon", "choir.agent")


def imports_of(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def loaded_after(code: str) -> set[str]:
    """The modules a fresh interpreter has loaded after running `code`."""
    script = f"{code}\nimport sys\nsys.stderr.write(' '.join(sys.modules))"
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, check=True
    )
    return set(done.stderr.split())


def _is_under(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


@pytest.mark.parametrize(
    "code",
    [
        "import choir.ctl.app",
        "import sys\nsys.argv = ['choirctl', '--help']\nfrom choir.ctl.app import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass",
        "import sys\nsys.argv = ['choir', '--help']\nfrom choir.launch.cli import main\nmain()",
    ],
    ids=["import choir.ctl.app", "choirctl --help", "choir --help"],
)
def test_choirctl_and_choir_never_load_textual(code: str):
    loaded = loaded_after(code)
    assert not any(_is_under(name, "textual") for name in loaded)
    assert not any(_is_under(name, "tui") for name in loaded)


def test_no_module_of_choir_imports_textual():
    offenders = [
        str(path.relative_to(ROOT))
        for path in (ROOT / "choir").rglob("*.py")
        if any(_is_under(name, "textual") for name in imports_of(path))
    ]
    assert offenders == []


def test_tui_modules_import_nothing_forbidden():
    offenders = {
        str(path.relative_to(ROOT)): sorted(
            name
            for name in imports_of(path)
            if any(_is_under(name, package) for package in FORBIDDEN_IN_TUI)
        )
        for path in (ROOT / "tui").rglob("*.py")
    }
    assert {path: names for path, names in offenders.items() if names} == {}


def test_the_running_console_loads_nothing_forbidden():
    loaded = loaded_after("import tui.app\nimport tui.views")
    assert "textual" in loaded
    assert (
        sorted(name for name in loaded if any(_is_under(name, p) for p in FORBIDDEN_IN_TUI)) == []
    )
