"""Parity: every choirctl command that talks to choird is in the console, and back.

choirctl's command tree is read from its typer app (every noun registered, as `choirctl --help`
sees it); the console's side is its actions (`tui.actions`) as the command palette offers them,
each a way of doing one command of the catalogue (`choir.commands`, held to choirctl in
`tests/commands/test_catalogue.py`), and the README's "choir tui ↔ choirctl" table. Commands left
out of the console are listed with a reason in `tui.actions.OFFLINE`: they work on files, not on
choird.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import typer.main

from choir.commands import command as catalogued
from choir.daemon.operator.api import VERBS
from choir.home import ChoirHome
from tui.actions import ACTIONS, OFFLINE, commands
from tui.app import ChoirApp
from tui.commands import ChoirCommands
from tui.views import spec

README = Path(__file__).resolve().parents[2] / "README.md"


def walk(command: Any, path: tuple[str, ...] = ()) -> Iterator[str]:
    subcommands = getattr(command, "commands", None)
    if subcommands is None:
        yield " ".join(path)
        return
    for name, sub in subcommands.items():
        yield from walk(sub, (*path, name))


@cache
def choirctl_commands() -> frozenset[str]:
    """Every leaf command of choirctl (`agent start`, `logs`…)."""
    from choir.ctl import app

    app._register()
    return frozenset(walk(typer.main.get_command(app.app)))


def readme_table() -> dict[str, str]:
    """choirctl command -> its row in the README's parity table."""
    text = README.read_text()
    section = text.split("## choir tui ↔ choirctl", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        found = re.match(r"\| `choirctl ([a-z -]+)` \|", line)
        if found:
            rows[found.group(1)] = line
    return rows


def test_every_choirctl_command_for_choird_has_a_console_action():
    missing = choirctl_commands() - commands() - set(OFFLINE)
    assert not missing, f"add these to tui.actions.ACTIONS (or OFFLINE, with why): {missing}"


def test_every_console_action_is_a_choirctl_command_and_exclusions_exist():
    assert commands() - choirctl_commands() == set()
    assert set(OFFLINE) <= choirctl_commands()
    assert not set(OFFLINE) & commands()


def test_every_console_action_is_a_catalogued_command_with_its_arguments():
    for action in ACTIONS:
        assert action.spec is catalogued(action.command), action.title
        assert "operator" in action.spec.scopes, action.title
        names = {param.name for param in action.spec.params}
        assert set(action.asks or ()) <= names, action.title
        assert set(action.required) <= names, action.title
        assert action.verb is not None or action.mode == "view", action.title


def test_every_verb_the_console_calls_is_served_by_this_choird():
    called = {action.verb for action in ACTIONS if action.verb is not None}
    assert called - set(VERBS) == set()


def test_every_tab_and_tab_action_named_exists():
    for action in ACTIONS:
        if action.view is None:
            continue
        view = spec(action.view).view
        if action.then:
            assert callable(getattr(view, f"action_{action.then}", None)), action


def test_the_readme_table_lists_exactly_the_console_actions():
    table = readme_table()
    assert set(table) == commands()
    for action in ACTIONS:
        assert action.title in table[action.command], action.title
        if action.key and action.key != "header":
            assert f"`{action.key}`" in table[action.command], action.key
    text = README.read_text()
    for command in OFFLINE:
        assert f"- `choirctl {command}` —" in text


async def test_the_palette_offers_every_action(tmp_path: Path):
    app = ChoirApp(ChoirHome(tmp_path / "home"), connect=False)
    async with app.run_test(size=(100, 30)):
        provider = ChoirCommands(app.screen)
        offered = {entry.command for entry in provider.entries() if entry.command}
        titles = [entry.title for entry in provider.entries()]
    assert offered == commands()
    assert len(titles) == len(set(titles)), "two palette entries with one title"
    for action in ACTIONS:
        assert action.title in titles
