"""What a catalogued command is: its name, arguments, who may run it, help, and its handler.

Pure data, no I/O and no imports beyond the standard library: choirctl imports the catalogue at
start (its help texts) and `choirctl --help` must stay fast — hence `NamedTuple`s, which Python
makes several times faster than frozen dataclasses.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final, Literal, NamedTuple

Scope = Literal["operator", "admin", "regular"]
"""Who may run a command: the operator (choirctl, the TUI), an admin DM, a regular DM (§19.3)."""
DmScope = Literal["admin", "regular"]

OPERATOR: Final[frozenset[Scope]] = frozenset({"operator"})
ADMIN: Final[frozenset[Scope]] = frozenset({"operator", "admin"})
EVERYONE: Final[frozenset[Scope]] = frozenset({"operator", "admin", "regular"})
DMS: Final[frozenset[Scope]] = frozenset({"admin", "regular"})

Kind = Literal[
    "agent", "running_agent", "session", "job", "lane", "approval", "workspace", "llm", "voice",
    "recover_choice", "word", "text", "settings", "resolver", "memory_store", "memory_mode",
    "item", "flag", "memory_class", "key_file",
]  # fmt: skip
"""What an argument's value is (a front end offers choices from it: the TUI's pick lists)."""

Fill = Literal[
    "given", "pick", "bound", "bound_or_named", "session", "scoped", "rest", "pairs", "dm", "none",
    "flag",
]  # fmt: skip
"""Where a DM takes an argument's value from:
`given` the next word of the line; `pick` the next word, or the DM picks (the only pending
approval, else a numbered list to choose from); `bound` the DM's bound agent;
`bound_or_named` the bound agent, or (admin DMs only) the agent named by the next word;
`session` the bound agent's active session; `scoped` the bound agent in a regular DM, nothing
(every agent) in an admin DM; `rest` the rest of the line; `pairs` every remaining `key=value`
word; `dm` the DM's own name; `none` never from a DM; `flag` True when the line ends with the
parameter's word (`/approve 2 restart`), else left out."""

Shows = Literal["fields", "status", "events", "approvals", "knowledge"]
"""How a DM says a command's answer (`choir.commands.text`): every field, an agent's status in
a few lines, events one a line, approvals numbered, knowledge items one a line."""

_DEFAULT_FILL: Final[Mapping[Kind, Fill]] = {
    "agent": "bound", "running_agent": "bound", "session": "session", "text": "rest",
    "settings": "pairs", "resolver": "dm", "flag": "flag",
}  # fmt: skip


class Param(NamedTuple):
    """One argument: the payload field it fills, and where each front end takes its value."""

    name: str
    """The operator verb's payload field."""
    label: str
    """How a front end asks for it (the TUI's prompt)."""
    kind: Kind
    optional: bool = False
    """Left out of the payload when not given (e.g. compact every lane)."""
    fill: Fill | None = None
    """Where a DM takes it (None: the kind's usual place, `_DEFAULT_FILL`, else `given`)."""
    operator: bool = True
    """Whether an operator front end asks for it (False: a DM-only field, e.g. the resolver)."""
    metavar: str = ""
    """Its name in a DM usage line (default: from the kind)."""
    asked_if: tuple[str, str] | None = None
    """(argument, value): an operator front end asks for it only when that argument was given
    that value, and then requires it (a personal item's user); otherwise it is left out."""

    @property
    def dm_fill(self) -> Fill:
        return self.fill or _DEFAULT_FILL.get(self.kind, "given")

    @property
    def word(self) -> str:
        return self.metavar or _METAVARS.get(self.kind, self.name)


_METAVARS: Final[Mapping[Kind, str]] = {
    "agent": "agent-id", "running_agent": "agent-id", "job": "name", "approval": "id",
    "workspace": "name", "llm": "name", "voice": "name", "text": "message",
    "settings": "key=value…", "item": "id",
}  # fmt: skip


class Command(NamedTuple):
    """One operator command, as every front end offers it."""

    name: str
    """The choirctl command (`agent stop`); a DM-only command has no choirctl twin (`inject`)."""
    help: str
    """choirctl's help text; its first line is the one-line summary elsewhere."""
    scopes: frozenset[Scope] = OPERATOR
    verb: str | None = None
    """The operator verb its handler calls (None: offline, or handled by the DM itself)."""
    params: tuple[Param, ...] = ()
    dm: str | None = None
    """Its DM spelling without the slash (`model llm`); None: not a DM command."""
    dm_help: str = ""
    """What it does, in a DM's words (`/help`, the README's table)."""
    dm_fixed: Mapping[str, Any] = MappingProxyType({})
    """Payload fields a DM always sends (e.g. how many events `/events` shows)."""
    done: str | None = None
    """What a front end says after it succeeded, formatted with the arguments; None: the answer
    itself is what to show."""
    shows: Shows = "fields"
    """How a DM says the answer when there is no `done`."""
    streams: bool = False
    """The verb streams progress items, then `{"kind": "result", …}`."""

    @property
    def summary(self) -> str:
        return self.help.split("\n", 1)[0]

    def param(self, name: str) -> Param:
        return next(param for param in self.params if param.name == name)

    def usage(self, scope: DmScope) -> str:
        """The DM spelling with its arguments as `scope` may give them: `/cancel <name>`."""
        assert self.dm is not None
        words = [f"/{self.dm}"]
        for param in self.params:
            fill = param.dm_fill
            bracketed = fill in ("given", "rest", "pairs") and param.optional
            bracketed = bracketed or fill in ("pick", "flag")
            if (fill == "bound_or_named" and scope == "admin") or bracketed:
                words.append(f"[{param.word}]")
            elif fill in ("given", "rest", "pairs"):
                words.append(f"<{param.word}>")
        return " ".join(words)

    def payload(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """The verb's payload from the arguments a front end gathered (empty ones left out)."""
        payload: dict[str, Any] = {}
        for param in self.params:
            value = values.get(param.name)
            if value not in (None, "", {}):
                payload[param.name] = value
        return payload
