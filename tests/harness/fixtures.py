"""The harness's fixtures, available to every test (a plugin of `tests/conftest.py`).

    @pytest.fixture
    def script() -> Script:          # what the test's model answers
        return SCRIPT

    async def test_x(home: ChoirHome, model: ScriptedModelServer) -> None: ...

- `root`: the test's own short directory under /tmp (Unix socket paths must stay under 107
  bytes; pytest-xdist lengthens pytest's tmp_path), removed afterwards; the logs of the homes
  in it are attached to the report of a test that fails (`tests.harness.failure_logs`).
- `model`: a `ScriptedModelServer` replaying the `script` fixture, which a test module (or its
  package's conftest) defines.
- `home`: `choirctl init`'s home (plus agent-2) on the test's database, its demo model `model`.

A package or module that needs another home defines its own `home` (pytest's nearest fixture
wins).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from choir.home import ChoirHome
from choir.scripted import Script, ScriptedModelServer
from choir.store.postgres.target import ConnectParams
from tests.harness.failure_logs import keep_logs_of
from tests.harness.homes import scripted_home, short_root


@pytest.fixture
def root(request: pytest.FixtureRequest) -> Iterator[Path]:
    """A fresh directory under /tmp, named after the test's package (`/tmp/faul-…`)."""
    package = request.path.parent.name
    with short_root(f"{package[:4]}-") as root:
        keep_logs_of(request.node, root)
        yield root


@pytest.fixture
def script() -> Script:
    raise pytest.UsageError("define a `script` fixture: the Script the test's model replays")


@pytest.fixture
async def model(script: Script) -> AsyncIterator[ScriptedModelServer]:
    async with ScriptedModelServer(script) as server:
        yield server


@pytest.fixture
def home(root: Path, pg_params: ConnectParams, model: ScriptedModelServer) -> ChoirHome:
    """`choirctl init`'s home (plus agent-2) whose demo model is the test's scripted server."""
    return scripted_home(root, pg_params, model.url)
