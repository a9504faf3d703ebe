"""choird and choir-agent import only what their start needs (issue 13: start-up time and RSS).

Each probe runs in a fresh interpreter and lists the heavy modules the entry point pulled in.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]


def loaded(imports: str, candidates: tuple[str, ...]) -> list[str]:
    probe = f"import sys\n{imports}\nprint([m for m in {candidates!r} if m in sys.modules])\n"
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    )
    found: list[str] = ast.literal_eval(done.stdout)
    return found


def test_choir_agent_skips_the_setup_commands_logic() -> None:
    imports = "import choir.agent.choir_agent, choir.agent.app, choir.agent.startup"
    setup = ("choir.config.scaffolding", "choir.config.validation", "choir.config.load")
    assert loaded(imports, setup) == []


@pytest.mark.parametrize(
    "heavy",
    [
        "docker",  # the Docker SDK: the process runtime and agent.build's first use load it
        "aiohttp",  # the agents' HTTP listener: --transport http only
        "cryptography",  # TLS certificates: --transport http only
    ],
)
def test_choird_on_the_process_runtime_skips(heavy: str) -> None:
    imports = "import choir.daemon.choird, choir.daemon.app, choir.daemon.operator.api"
    assert loaded(imports, (heavy,)) == []
