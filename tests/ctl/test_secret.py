"""`choirctl secret set|list|delete`: values go in and never come out."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from tests.ctl.cli import Run, choirctl, choirctl_on_tty, snapshot

VALUE = "sk-or-v1-TOPSECRET-0123456789"


def _secrets(home: Path) -> dict[str, str]:
    data: dict[str, str] = json.loads((home / "secrets.json").read_text())
    return data


def _never_shows(run: Run, value: str = VALUE) -> None:
    assert value not in run.out
    assert value not in run.err


def _reference_secret(home: Path, name: str) -> None:
    config = json.loads((home / "config.json").read_text())
    config["search"]["brave"] = {"secret": name}
    (home / "config.json").write_text(json.dumps(config, indent=2))


def test_set_from_argument(home: Path) -> None:
    run = choirctl(home, "secret", "set", "openrouter-key", VALUE)
    assert run.code == 0, run.err
    assert run.out == f"secret 'openrouter-key' added ({home}/secrets.json)\n"
    assert _secrets(home) == {"openrouter-key": VALUE}
    assert stat.S_IMODE((home / "secrets.json").stat().st_mode) == 0o600
    _never_shows(run)


@pytest.mark.parametrize(
    ("piped", "stored"),
    [
        (f"{VALUE}\n", VALUE),
        (f"{VALUE}\r\n", VALUE),
        (VALUE, VALUE),
        ("line1\nline2\n\n", "line1\nline2\n"),
    ],
    ids=["newline", "crlf", "no-newline", "multi-line keeps all but one newline"],
)
def test_set_from_stdin_strips_one_trailing_newline(home: Path, piped: str, stored: str) -> None:
    run = choirctl(home, "secret", "set", "key", stdin=piped)
    assert run.code == 0, run.err
    assert _secrets(home) == {"key": stored}
    _never_shows(run, stored)


def test_set_replaces_and_reports_update(home: Path) -> None:
    _reference_secret(home, "brave-key")
    choirctl(home, "secret", "set", "brave-key", "old")
    run = choirctl(home, "secret", "set", "brave-key", VALUE, "--json")
    assert run.json() == {
        "action": "updated",
        "file": f"{home}/secrets.json",
        "name": "brave-key",
        "referenced_by": ["search.brave.secret"],
    }
    assert _secrets(home) == {"brave-key": VALUE}


def test_set_warns_when_nothing_references_the_secret(home: Path) -> None:
    run = choirctl(home, "secret", "set", "orphan", VALUE)
    assert run.err == "warning: no `secret` field in config.json references 'orphan' yet\n"


def test_list_shows_names_references_and_missing(home: Path) -> None:
    _reference_secret(home, "brave-key")
    choirctl(home, "secret", "set", "unused", VALUE)
    run = choirctl(home, "secret", "list", "--json")
    assert run.code == 0
    assert run.json() == {
        "file": f"{home}/secrets.json",
        "missing": ["brave-key"],
        "secrets": [
            {"name": "brave-key", "referenced_by": ["search.brave.secret"], "set": False},
            {"name": "unused", "referenced_by": [], "set": True},
        ],
    }
    human = choirctl(home, "secret", "list")
    assert human.out.splitlines() == [
        "NAME       SET  REFERENCED BY",
        "brave-key  NO   search.brave.secret",
        "unused     yes",
    ]
    assert human.err == (
        "warning: secret 'brave-key' is referenced but not set (choirctl secret set brave-key)\n"
    )
    _never_shows(run)
    _never_shows(human)


def test_delete_removes_and_warns_about_references(home: Path) -> None:
    _reference_secret(home, "brave-key")
    choirctl(home, "secret", "set", "brave-key", VALUE)
    run = choirctl(home, "secret", "delete", "brave-key")
    assert run.code == 0
    assert run.err == "warning: still referenced by search.brave.secret\n"
    assert _secrets(home) == {}
    _never_shows(run)


def test_delete_unknown_is_not_found_and_changes_nothing(home: Path) -> None:
    before = snapshot(home)
    run = choirctl(home, "secret", "delete", "nope")
    assert run.code == 4
    assert run.err == (
        f"error: no secret named 'nope' in {home}/secrets.json (see choirctl secret list)\n"
    )
    assert snapshot(home) == before


@pytest.mark.parametrize(
    "args",
    [("set", "x", VALUE), ("list",), ("delete", "x")],
    ids=["set", "list", "delete"],
)
def test_world_readable_secrets_refused(home: Path, args: tuple[str, ...]) -> None:
    choirctl(home, "secret", "set", "x", "old")
    (home / "secrets.json").chmod(0o644)
    before = snapshot(home)
    run = choirctl(home, "secret", *args)
    assert run.code == 3
    assert run.err == (
        "error: secrets.json is readable by group or others (mode 0644): "
        f"run chmod 600 {home}/secrets.json\n"
    )
    assert snapshot(home) == before
    _never_shows(run)


@pytest.mark.parametrize(
    ("args", "stdin", "code", "message"),
    [
        (("set", "bad name", VALUE), None, 2, "invalid secret name 'bad name'"),
        (("set", "empty"), "", 2, "empty value for secret 'empty'"),
        (("set", "empty"), "\n", 2, "empty value for secret 'empty'"),
    ],
    ids=["bad-name", "empty-stdin", "just-newline"],
)
def test_set_rejects_bad_input(
    home: Path, args: tuple[str, ...], stdin: str | None, code: int, message: str
) -> None:
    before = snapshot(home)
    run = choirctl(home, "secret", *args, stdin=stdin)
    assert run.code == code
    assert run.err.startswith(f"error: {message}")
    assert snapshot(home) == before


@pytest.mark.parametrize("args", [("set", "x", VALUE), ("list",), ("delete", "x")])
def test_without_a_home_says_to_run_init(tmp_path: Path, args: tuple[str, ...]) -> None:
    run = choirctl(tmp_path / "none", "secret", *args)
    assert run.code == 4
    assert run.err == f"error: {tmp_path}/none does not exist: run choirctl init\n"
    assert not (tmp_path / "none").exists()


def test_malformed_secrets_file_never_echoes_values(home: Path) -> None:
    (home / "secrets.json").write_text(f'{{"a": "{VALUE}", "b": 42, "a": "{VALUE}2"}}')
    run = choirctl(home, "secret", "list")
    assert run.code == 3
    assert run.err.splitlines() == [
        "error: secrets.json has 2 problem(s):",
        "  secrets.json: duplicate key 'a'",
        "  secrets.json: secret 'b' must be a JSON string",
    ]
    _never_shows(run)


def test_set_on_a_terminal_prompts_without_echo(home: Path) -> None:
    code, shown = choirctl_on_tty(home, "secret", "set", "typed-key", typed=VALUE)
    assert code == 0, shown
    assert "value of secret typed-key: " in shown
    assert VALUE not in shown
    assert _secrets(home) == {"typed-key": VALUE}
