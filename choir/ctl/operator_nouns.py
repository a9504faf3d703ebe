"""The choirctl nouns that talk to choird's operator socket, registered on the root app.

`choir.ctl.app._register()` calls `register_operator_nouns(app)`; the `agent`, `config` and
`secret` nouns mix offline and choird commands and are registered with the offline ones.
"""

from __future__ import annotations

import typer

OPERATOR_NOUNS = {
    "status": "choir.ctl.status",
    "choird": "choir.ctl.choird",
    "chat": "choir.ctl.sessions.chat",
    "logs": "choir.ctl.sessions.logs",
    "session": "choir.ctl.sessions.session",
    "approval": "choir.ctl.sessions.approval",
    "tool": "choir.ctl.tool",
    "workspace": "choir.ctl.workspace",
    "model": "choir.ctl.models.model",
    "voice": "choir.ctl.models.voice",
    "memory": "choir.ctl.memory.commands",
    "knowledge": "choir.ctl.memory.knowledge",
    "gateway": "choir.ctl.gateway",
    "usage": "choir.ctl.usage",
    "inbox": "choir.ctl.sessions.inbox",
}
"""Each operator noun and the module that holds it, imported only when the noun is used."""
_COMMANDS = {"status", "chat", "logs", "usage"}


def register_operator_nouns(app: typer.Typer, *, only: str | None = None) -> None:
    """Register every operator noun, or just `only` (a name of OPERATOR_NOUNS)."""
    import importlib

    for noun, module_name in OPERATOR_NOUNS.items():
        if only is not None and noun != only:
            continue
        module = importlib.import_module(module_name)
        if noun in _COMMANDS:
            app.command(noun)(getattr(module, noun))
        else:
            app.add_typer(module.app, name=noun)
