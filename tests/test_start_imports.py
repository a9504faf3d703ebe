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


def test_choir_agent_starts_without_an_http_client() -> None:
    """The LLM client's aiohttp loads at the first model call (~0.1 s of CPU), not at start;
    httpx is only choird's HTTP transport's."""
    imports = "import choir.agent.choir_agent, choir.agent.app, choir.agent.startup"
    assert loaded(imports, ("aiohttp", "httpx")) == []


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


def test_choir_agent_skips_the_command_line_tool_of_httpx() -> None:
    """`import httpx` would load its CLI (click, rich, pygments: ~70 ms); `choir` blocks it."""
    imports = "import choir.agent.app, choir.adapters.llm, httpx"
    assert loaded(imports, ("click", "rich", "pygments")) == []


def test_choir_agent_builds_no_event_validator_at_import() -> None:
    """One `EVENT_ADAPTER`, built on first use: each `TypeAdapter(Event)` built at import cost
    choir-agent's start ~50 ms."""
    probe = (
        "import sys, choir.agent.app\n"
        "from choir.protocol.log.events import EVENT_ADAPTER\n"
        "print(repr(type(EVENT_ADAPTER.validator).__name__))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    )
    assert ast.literal_eval(done.stdout) == "MockValSer"
