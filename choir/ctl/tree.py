"""choirctl's typer tree: the root app and its nouns, one module per noun, registered on demand."""

from __future__ import annotations

import sys

import typer

from choir.ctl.render.output import print_error
from choir.ctl.root_help import ROOT_HELP
from choir.errors import ChoirError

app = typer.Typer(
    rich_markup_mode=None,
    name="choirctl",
    help=ROOT_HELP,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


@app.callback()
def _root() -> None:
    """Keeps choirctl a group of commands even when only one noun is registered."""


OFFLINE_NOUNS = ("init", "config", "secret", "agent", "schema")


def _register(only: str | None = None) -> None:
    """Register every noun, or just `only` when the command line names a known one: each noun
    module costs import time, and choirctl must start fast."""
    from choir.ctl.operator_nouns import OPERATOR_NOUNS, register_operator_nouns

    if only is not None and only not in OFFLINE_NOUNS and only not in OPERATOR_NOUNS:
        only = None
    if only in (None, "init"):
        from choir.ctl import init

        app.command("init")(init.init)
    if only in (None, "config"):
        from choir.ctl import config

        app.add_typer(config.app, name="config")
    if only in (None, "secret"):
        from choir.ctl import secret

        app.add_typer(secret.app, name="secret")
    if only in (None, "agent"):
        from choir.ctl.agent import commands as agent

        app.add_typer(agent.app, name="agent")
    if only in (None, "schema"):
        from choir.ctl import schema

        app.command("schema")(schema.schema)
    register_operator_nouns(app, only=only)


def run() -> None:
    """Register the nouns the command line needs and run it."""
    words = [arg for arg in sys.argv[1:] if not arg.startswith("-")]
    _register(words[0] if words else None)
    try:
        app()
    except ChoirError as err:
        print_error(err)
        sys.exit(int(err.exit_code))
