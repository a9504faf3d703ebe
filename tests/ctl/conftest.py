from __future__ import annotations

from pathlib import Path

import pytest

from choir.config import init_home
from choir.home import ChoirHome


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A $CHOIR_HOME as `choirctl init` makes it (built in-process: test_init covers the CLI)."""
    root = tmp_path / "home"
    init_home(ChoirHome(root))
    return root
