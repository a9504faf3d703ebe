"""The choirctl nouns that talk to choird's operator socket, registered on the root app.

`choir.ctl.app._register()` calls `register_operator_nouns(app)`; the `agent`, `config` and
`secret` nouns mix offline and choird commands and are registered with the offline ones.
"""

from __future__ import annotations

import typer


def register_operator_nouns(app: typer.Typer) -> None:
    from choir.ctl import approval, chat, logs, model, session, status, voice, workspace

    app.command("status")(status.status)
    app.command("chat")(chat.chat)
    app.command("logs")(logs.logs)
    app.add_typer(session.app, name="session")
    app.add_typer(approval.app, name="approval")
    app.add_typer(workspace.app, name="workspace")
    app.add_typer(model.app, name="model")
    app.add_typer(voice.app, name="voice")
