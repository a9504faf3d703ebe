"""The choirctl nouns that talk to choird's operator socket, registered on the root app.

`choir.ctl.app._register()` calls `register_operator_nouns(app)`; the `agent`, `config` and
`secret` nouns mix offline and choird commands and are registered with the offline ones.
"""

from __future__ import annotations

import typer

OPERATOR_NOUNS = (
    "status",
    "chat",
    "logs",
    "session",
    "approval",
    "tool",
    "workspace",
    "model",
    "voice",
    "memory",
    "knowledge",
    "gateway",
    "usage",
    "inbox",
)
_COMMANDS = {"status", "chat", "logs", "usage"}


def register_operator_nouns(app: typer.Typer, *, only: str | None = None) -> None:
    """Register every operator noun, or just `only` (a name of OPERATOR_NOUNS)."""
    import importlib

    for noun in OPERATOR_NOUNS:
        if only is not None and noun != only:
            continue
        module = importlib.import_module(f"choir.ctl.{noun}")
        if noun in _COMMANDS:
            app.command(noun)(getattr(module, noun))
        else:
            app.add_typer(module.app, name=noun)
