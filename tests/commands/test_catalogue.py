"""The one command catalogue against its front ends: choirctl's command tree and help texts,
choird's operator verbs, the §19.3 DM spellings, and the DM parser (pure: no choird needed)."""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import typer.main

from choir.commands import CATALOGUE, command, operator_commands
from choir.commands.dm import Invocation, Seat, Usage, as_message, parse, payload, refusal
from choir.commands.model import DmScope
from choir.daemon.operator.api import VERBS

REGULAR = Seat("dm-2", "regular", "agent-2", "s-2")
ADMIN = Seat("console", "admin", "agent-1", "s-1")


def walk(group: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, Any]]:
    subcommands = getattr(group, "commands", None)
    if subcommands is None:
        yield " ".join(path), group
        return
    for name, sub in subcommands.items():
        yield from walk(sub, (*path, name))


@cache
def choirctl() -> dict[str, str]:
    """choirctl's leaf commands (as `choirctl --help` registers them) and their help texts."""
    from choir.ctl import app

    app._register()
    return {name: leaf.help for name, leaf in walk(typer.main.get_command(app.app))}


def test_choirctls_commands_are_the_catalogues_operator_commands_both_ways() -> None:
    assert set(choirctl()) - operator_commands() == set(), "catalogue these in choir.commands"
    assert operator_commands() - set(choirctl()) == set(), "choirctl lacks these commands"


def test_choirctls_help_texts_are_the_catalogues() -> None:
    for name, text in choirctl().items():
        assert text == command(name).help, name


def test_every_verb_the_catalogue_calls_is_served_by_choird() -> None:
    called = {c.verb for c in CATALOGUE if c.verb is not None}
    assert called - set(VERBS) == set()


def test_names_and_dm_spellings_are_unique_and_every_dm_command_says_what_it_does() -> None:
    assert len({c.name for c in CATALOGUE}) == len(CATALOGUE)
    spelled = [c for c in CATALOGUE if c.dm is not None]
    assert len({(c.dm, c.usage("admin")) for c in spelled}) == len(spelled)
    for c in spelled:
        assert c.dm_help, c.name
        assert c.scopes & {"admin", "regular"}, c.name
        assert c.verb is not None or c.name in ("inject", "help"), c.name


SECTION_19_3: list[tuple[str, str, frozenset[str]]] = [
    ("/status", "agent status", frozenset({"admin", "regular"})),
    ("/stop", "agent stop", frozenset({"admin", "regular"})),
    ("/restart", "agent restart", frozenset({"admin", "regular"})),
    ("/cores", "session cores", frozenset({"admin", "regular"})),
    ("/cancel job-a", "session cancel", frozenset({"admin", "regular"})),
    ("/compact", "session compact", frozenset({"admin", "regular"})),
    ("/events", "session events", frozenset({"admin", "regular"})),
    ("/model", "model get", frozenset({"admin", "regular"})),
    ("/model llm sonnet", "model set", frozenset({"admin", "regular"})),
    ("/voice", "voice get", frozenset({"admin", "regular"})),
    ("/voice calm", "voice set", frozenset({"admin", "regular"})),
    ("/inject stop after the tests", "inject", frozenset({"admin", "regular"})),
    ("/approvals", "approval list", frozenset({"admin", "regular"})),
    ("/approve", "approval approve", frozenset({"admin", "regular"})),
    ("/reject ap-1", "approval reject", frozenset({"admin", "regular"})),
    ("/start agent-3 llm=sonnet", "agent start", frozenset({"admin"})),
    ("/stop agent-3", "agent stop", frozenset({"admin"})),
    ("/restart agent-3", "agent restart", frozenset({"admin"})),
    ("/update", "agent update", frozenset({"admin"})),
    ("/update agent-3", "agent update", frozenset({"admin"})),
    ("/update-all", "agent update-all", frozenset({"admin"})),
    ("/config load", "config load", frozenset({"admin"})),
    ("/config diff", "config diff", frozenset({"admin"})),
    ("/config apply", "config apply", frozenset({"admin"})),
    ("/workspace list", "workspace list", frozenset({"admin"})),
    ("/workspace reset ws-1", "workspace reset", frozenset({"admin"})),
    ("/secret list", "secret list", frozenset({"admin"})),
    ("/agent list", "agent list", frozenset({"admin"})),
    ("/agent build agent-3", "agent build", frozenset({"admin"})),
]


@pytest.mark.parametrize(("text", "name", "allowed"), SECTION_19_3)
def test_every_section_19_3_command_parses_and_only_its_dms_may_run_it(
    text: str, name: str, allowed: frozenset[DmScope]
) -> None:
    for scope in ("admin", "regular"):
        parsed = parse(text, scope)
        assert isinstance(parsed, Invocation), (text, parsed)
        assert parsed.command.name == name
        assert (refusal(parsed, scope) is None) == (scope in allowed), (text, scope)


def test_a_regular_dm_fills_its_bound_agent_and_session() -> None:
    def built(text: str, seat: Seat) -> dict[str, Any]:
        parsed = parse(text, seat.scope)
        assert isinstance(parsed, Invocation)
        return payload(parsed, seat)

    assert built("/status", REGULAR) == {"agent_id": "agent-2"}
    assert built("/cancel job-a", REGULAR) == {"session_id": "s-2", "job_name": "job-a"}
    assert built("/events", REGULAR) == {"limit": 20, "session_id": "s-2"}
    assert built("/compact", REGULAR) == {"session_id": "s-2"}
    assert built("/model llm sonnet", REGULAR) == {"agent_id": "agent-2", "llm": "sonnet"}
    assert built("/voice calm", REGULAR) == {"agent_id": "agent-2", "voice_profile": "calm"}
    # approvals: a regular DM's are scoped to its agent; an admin DM's are everyone's
    assert built("/approvals", REGULAR) == {"agent_id": "agent-2"}
    assert built("/approvals", ADMIN) == {}
    assert built("/approve ap-1", REGULAR) == {
        "approval_id": "ap-1", "agent_id": "agent-2", "by": "dm-2",
    }  # fmt: skip
    assert built("/reject", ADMIN) == {"by": "console"}
    # the restart choice: a trailing `restart`, after the id or alone (the only pending one)
    assert built("/approve ap-1 restart", REGULAR) == {
        "approval_id": "ap-1", "agent_id": "agent-2", "by": "dm-2", "restart": True,
    }  # fmt: skip
    assert built("/approve 2 RESTART", ADMIN) == {
        "approval_id": "2",
        "by": "console",
        "restart": True,
    }
    assert built("/approve restart", ADMIN) == {"by": "console", "restart": True}
    # admin: the bound agent unless another is named; start takes key=value bindings
    assert built("/stop", ADMIN) == {"agent_id": "agent-1"}
    assert built("/stop agent-3", ADMIN) == {"agent_id": "agent-3"}
    assert built("/start agent-3 llm=sonnet dm=dm-9", ADMIN) == {
        "agent_id": "agent-3", "overrides": {"llm": "sonnet", "dm": "dm-9"},
    }  # fmt: skip


def test_a_memory_key_is_an_operator_front_ends_never_a_dms() -> None:
    start = command("agent start")
    assert start.param("memory_key").dm_fill == "none"  # the console asks; a DM never takes it
    assert start.usage("admin") == "/start <agent-id> [key=value…]"
    key = "ab" * 32
    parsed = parse(f"/start agent-3 memory_key={key}", "admin")
    assert isinstance(parsed, Invocation)
    assert payload(parsed, ADMIN) == {
        "agent_id": "agent-3",
        "overrides": {"memory_key": key},
    }  # fmt: skip  (a binding choird refuses, never the key field)


def test_a_regular_dm_may_not_name_another_agent() -> None:
    parsed = parse("/restart agent-1", "regular")
    assert isinstance(parsed, Invocation)
    assert refusal(parsed, "regular") == (
        "a regular DM acts only on its bound agent: send /restart without an agent id"
    )
    assert refusal(parsed, "admin") is None


@pytest.mark.parametrize(
    ("text", "usage"),
    [
        ("/frobnicate", "unknown command /frobnicate: /help lists the commands this DM can run"),
        ("/", "a command follows the slash: /help lists them"),
        ("/cancel", "usage: /cancel <name>"),
        ("/approve ap-1 now", "usage: /approve [id] [restart]"),
        ("/approve ap-1 restart later", "usage: /approve [id] [restart]"),
        ("/cancel a b", "usage: /cancel <name>"),
        ("/inject", "usage: /inject <message>"),
        ("/inject   ", "usage: /inject <message>"),
        ("/model llm", "usage: /model or /model llm <name>"),
        ("/config", "usage: /config apply or /config diff or /config load"),
        ("/config reload", "usage: /config apply or /config diff or /config load"),
        ("/workspace wipe ws-1", "usage: /workspace list or /workspace reset <name>"),
        ("/agent build", "usage: /agent build <agent-id>"),
        ("/start", "usage: /start <agent-id> [key=value…]"),
        ("/start agent-3 llm", "usage: /start <agent-id> [key=value…]"),
        ("/status now", "usage: /status"),
        ("/update-all please", "usage: /update-all"),
    ],
)
def test_unknown_and_malformed_commands_get_one_usage_line(text: str, usage: str) -> None:
    assert parse(text, "admin") == Usage(usage)


def test_usage_shows_what_the_scope_may_give() -> None:
    assert parse("/stop a b", "admin") == Usage("usage: /stop [agent-id]")
    assert parse("/stop a b", "regular") == Usage("usage: /stop")
    refused = "refused: /start is an admin command: this DM may not run it"
    assert parse("/start", "regular") == Usage(refused)
    assert parse("/config", "regular") == Usage(
        "refused: /config load is an admin command: this DM may not run it"
    )


def test_messages_are_not_commands_and_a_double_slash_sends_a_slash() -> None:
    assert parse("hello /status", "admin") is None
    assert parse("//status is a word", "admin") is None
    assert as_message("//status is a word") == "/status is a word"
    assert as_message("hello") == "hello"
    parsed = parse("  /INJECT  keep  spacing ", "regular")
    assert isinstance(parsed, Invocation)
    assert parsed.given == {"text": "keep  spacing"}


def test_the_readme_table_lists_every_dm_command() -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme.split("## Console DM commands", 1)[1].split("\n## ", 1)[0]
    for c in CATALOGUE:
        if c.dm is not None:
            assert f"`/{c.dm}" in section, c.dm


def test_dm_answers_are_shown_the_way_the_catalogue_says() -> None:
    shows = {c.name: c.shows for c in CATALOGUE if c.shows != "fields"}
    assert shows == {
        "agent status": "status",
        "session events": "events",
        "approval list": "approvals",
        "memory about": "knowledge",
    }
