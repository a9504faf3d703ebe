"""A DM's `/…` text as a catalogued command and its arguments (§19.3), and who may run it.

    parse("/cancel build-docs", "regular") -> Invocation(session cancel, {"job_name": …})
    parse("/cancel", "regular")            -> Usage("usage: /cancel <name>")
    parse("hello", "regular")              -> None: a message for the agent

The spelling is scope-independent — `/stop agent-2` parses in a regular DM too — so that
`refusal` can say why it is refused rather than calling it unknown; `payload` then fills the
verb's fields from the DM (its bound agent, that agent's active session, its name). `//text`
sends `/text` to the agent as a message.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from choir.commands.catalogue import CATALOGUE
from choir.commands.model import Command, DmScope

_WORD: Final = re.compile(r"\S+")


@dataclass(frozen=True)
class Invocation:
    """A command and the values its line gave (by parameter name)."""

    command: Command
    given: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Usage:
    """A line that is no command this DM knows, or one with the wrong arguments: a one-line
    reply saying how it is spelled."""

    message: str


@dataclass(frozen=True)
class Seat:
    """Where a command is sent from: the DM, its scope, its bound agent and its active session."""

    dm: str
    scope: DmScope
    agent_id: str
    session_id: str


def spoken(scope: DmScope) -> list[Command]:
    """The DM commands `scope` may run, in catalogue order."""
    return [c for c in CATALOGUE if c.dm is not None and scope in c.scopes]


def is_command(text: str) -> bool:
    """Whether a DM line is a command (`//…` is a message starting with a slash)."""
    stripped = text.lstrip()
    return stripped.startswith("/") and not stripped.startswith("//")


def as_message(text: str) -> str:
    """The message a non-command line sends: `//x` sends `/x`."""
    stripped = text.lstrip()
    return stripped[1:] if stripped.startswith("//") else text


def parse(text: str, scope: DmScope) -> Invocation | Usage | None:
    """The command `text` spells, a usage error, or None when it is a message."""
    if not is_command(text):
        return None
    line = text.strip()
    words = [(m.group(), m.end()) for m in _WORD.finditer(line)]
    keyword = words[0][0][1:].lower()
    if not keyword:
        return Usage("a command follows the slash: /help lists them")
    candidates = [c for c in CATALOGUE if c.dm is not None and c.dm.split()[0] == keyword]
    if not candidates:
        return Usage(f"unknown command /{keyword}: /help lists the commands this DM can run")
    spelled = [c for c in candidates if _spelled(c, words)]
    for command in spelled:
        invocation = _bind(command, words, line)
        if invocation is not None:
            return invocation
    meant = spelled or candidates
    if not any(scope in c.scopes for c in meant):  # no usage lesson for what it may not run
        return Usage(f"refused: {_admin_only(meant[0])}")
    usages = " or ".join(sorted({c.usage(scope) for c in meant if scope in c.scopes}))
    return Usage(f"usage: {usages}")


def _spelled(command: Command, words: list[tuple[str, int]]) -> bool:
    assert command.dm is not None
    names = command.dm.split()
    return [w.lower() for w, _ in words[: len(names)]] == [f"/{names[0]}", *names[1:]]


def _bind(command: Command, words: list[tuple[str, int]], line: str) -> Invocation | None:
    """The command's arguments from the words after its spelling; None if they do not fit."""
    assert command.dm is not None
    start = len(command.dm.split())
    if start > len(words):
        return None
    rest = words[start:]
    given: dict[str, Any] = {}
    for param in command.params:  # a flag's word ends the line, after the other arguments
        if param.dm_fill == "flag" and rest and rest[-1][0].lower() == param.word:
            given[param.name] = True
            rest = rest[:-1]
    for param in command.params:
        fill = param.dm_fill
        if fill in ("given", "pick", "bound_or_named"):
            if rest:
                given[param.name] = rest.pop(0)[0]
            elif fill == "given" and not param.optional:
                return None
        elif fill == "rest":
            text = line[words[start - 1][1] :].strip()
            rest = []
            if text:
                given[param.name] = text
            elif not param.optional:
                return None
        elif fill == "pairs":
            pairs = [word.partition("=") for word, _ in rest]
            if any(not key or not sep or not value for key, sep, value in pairs):
                return None
            given[param.name] = {key: value for key, _, value in pairs}
            rest = []
    return None if rest else Invocation(command, given)


def refusal(invocation: Invocation, scope: DmScope) -> str | None:
    """Why a DM of `scope` may not run `invocation` (None: it may)."""
    command = invocation.command
    if scope not in command.scopes:
        return _admin_only(command)
    if scope == "regular":
        for param in command.params:
            if param.dm_fill == "bound_or_named" and param.name in invocation.given:
                return (
                    f"a regular DM acts only on its bound agent: send /{command.dm} "
                    "without an agent id"
                )
    return None


def _admin_only(command: Command) -> str:
    return f"/{command.dm} is an admin command: this DM may not run it"


def payload(invocation: Invocation, seat: Seat) -> dict[str, Any]:
    """The verb's payload: the line's values, and what the DM itself fills in."""
    values: dict[str, Any] = {}
    for param in invocation.command.params:
        fill = param.dm_fill
        if fill in ("bound", "bound_or_named"):
            values[param.name] = invocation.given.get(param.name, seat.agent_id)
        elif fill == "session":
            values[param.name] = seat.session_id
        elif fill == "scoped" and seat.scope == "regular":
            values[param.name] = seat.agent_id
        elif fill == "dm":
            values[param.name] = seat.dm
        elif param.name in invocation.given:
            values[param.name] = invocation.given[param.name]
    return {**invocation.command.dm_fixed, **invocation.command.payload(values)}


def help_lines(scope: DmScope) -> list[str]:
    """`/help`: every command `scope` may run (an agent's own first), its usage and summary."""
    ordered = sorted(spoken(scope), key=lambda c: "regular" not in c.scopes)
    return [f"{c.usage(scope)} — {c.dm_help or c.summary}" for c in ordered]
