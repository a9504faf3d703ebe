"""Loading a home: both files together, every problem at once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from choir.config import ChoirConfig, config_hash, init_home, load_home
from choir.errors import ConfigError
from choir.home import ChoirHome


@pytest.fixture
def home(tmp_path: Path) -> ChoirHome:
    home = ChoirHome(tmp_path / "home")
    init_home(home)
    return home


def test_loads_a_fresh_home(home: ChoirHome) -> None:
    loaded = load_home(home)
    assert isinstance(loaded.config, ChoirConfig)
    assert loaded.warnings == []
    assert loaded.config_hash == config_hash(loaded.config)
    assert len(loaded.secrets) == 0


def test_errors_from_both_files_come_together(home: ChoirHome) -> None:
    home.secrets_file.chmod(0o640)
    config = json.loads(home.config_file.read_text())
    config["models"]["demo"]["temperature"] = 9
    home.config_file.write_text(json.dumps(config))
    with pytest.raises(ConfigError) as caught:
        load_home(home)
    assert caught.value.problems == [
        "secrets.json is readable by group or others (mode 0640): "
        f"run chmod 600 {home.secrets_file}",
        "models.demo.temperature: Input should be less than or equal to 2",
    ]
    assert str(caught.value).splitlines()[0] == "config.json and secrets.json have 2 problem(s):"


def test_missing_secrets_file_is_a_warning(home: ChoirHome) -> None:
    home.secrets_file.unlink()
    loaded = load_home(home)
    assert loaded.warnings == [
        f"secrets.json: {home.secrets_file} does not exist, so no secret is set "
        "(choirctl secret set <name> creates it)"
    ]
