"""secrets.json: strict, private, atomically written, and values never shown."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from choir.config import SecretStore
from choir.errors import ConfigError, NotFoundError

VALUE = "hunter2-very-secret"


def test_round_trip_is_private(tmp_path: Path) -> None:
    path = tmp_path / "secrets.json"
    SecretStore.empty().with_secret("a", VALUE).with_secret("b.c", "2").save(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    loaded = SecretStore.load(path)
    assert loaded.names() == ["a", "b.c"]
    assert loaded.get("a").get_secret_value() == VALUE
    assert list(tmp_path.iterdir()) == [path]


def test_values_never_appear_in_reprs() -> None:
    store = SecretStore.empty().with_secret("a", VALUE)
    assert VALUE not in repr(store)
    assert VALUE not in str(store)
    assert repr(store) == "SecretStore(names=['a'])"
    assert repr(store.get("a")) == "SecretStr('**********')"


def test_updates_return_new_stores() -> None:
    store = SecretStore.empty().with_secret("a", "1")
    updated = store.with_secret("a", "2").without("a")
    assert "a" in store
    assert len(updated) == 0
    with pytest.raises(NotFoundError, match="no secret named 'x'"):
        store.without("x")


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o620])
def test_load_refuses_files_others_can_access(tmp_path: Path, mode: int) -> None:
    path = tmp_path / "secrets.json"
    path.write_text("{}")
    path.chmod(mode)
    how = "readable" if mode & 0o044 else "writable"
    with pytest.raises(ConfigError) as caught:
        SecretStore.load(path)
    assert caught.value.problems == [
        f"secrets.json is {how} by group or others (mode {mode:04o}): run chmod 600 {path}"
    ]


def test_missing_file_is_empty_only_when_allowed(tmp_path: Path) -> None:
    assert len(SecretStore.load(tmp_path / "absent.json")) == 0
    with pytest.raises(NotFoundError):
        SecretStore.load(tmp_path / "absent.json", missing_ok=False)


@pytest.mark.parametrize(
    ("text", "problems"),
    [
        (f'{{"a": ["{VALUE}"]}}', ["secrets.json: secret 'a' must be a JSON string"]),
        (
            f'{{"bad name": "{VALUE}"}}',
            [
                "secrets.json: invalid secret name 'bad name': "
                "must match ^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"
            ],
        ),
        (
            f'{{"a": "{VALUE}"',
            [
                f"secrets.json: invalid JSON at line 1, column {len(VALUE) + 9}: "
                "Expecting ',' delimiter"
            ],
        ),
        (f'["{VALUE}"]', ["secrets.json: must be a JSON object {...}"]),
    ],
)
def test_parse_problems_never_include_values(text: str, problems: list[str]) -> None:
    with pytest.raises(ConfigError) as caught:
        SecretStore.parse(text)
    assert caught.value.problems == problems
    assert VALUE not in str(caught.value)


def test_save_replaces_atomically_and_keeps_mode(tmp_path: Path) -> None:
    path = tmp_path / "secrets.json"
    SecretStore.empty().with_secret("a", "1").save(path)
    inode = path.stat().st_ino
    SecretStore.load(path).with_secret("b", "2").save(path)
    assert path.stat().st_ino != inode
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert sorted(os.listdir(tmp_path)) == ["secrets.json"]
