"""One catalogue of operator commands for every front end (choirctl, TUI, console DM, Telegram).

`catalogue` lists them (pure data); `dm` parses a DM's `/…` text into a command and its
arguments; `text` renders answers as readable lines. Nothing here does I/O: the DMs run commands
through choird's operator verbs (`choir.daemon.gateway.commands`).
"""

from choir.commands.catalogue import (
    BY_NAME,
    CATALOGUE,
    command,
    documented,
    help_of,
    operator_commands,
)
from choir.commands.model import Command, DmScope, Param, Scope

__all__ = [
    "BY_NAME",
    "CATALOGUE",
    "Command",
    "DmScope",
    "Param",
    "Scope",
    "command",
    "documented",
    "help_of",
    "operator_commands",
]
