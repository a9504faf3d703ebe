from __future__ import annotations

from pathlib import Path

import pytest

from choir.home import ChoirHome
from tests.harness.homes import initialized


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A $CHOIR_HOME as `choirctl init` makes it (built in-process: test_init covers the CLI)."""
    root = tmp_path / "home"
    initialized(ChoirHome(root))
    return root
