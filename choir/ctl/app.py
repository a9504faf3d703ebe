"""choirctl: the scripted admin CLI. One module per noun; this module only wires them up."""

from __future__ import annotations

import sys

import typer

from choir.ctl.output import print_error
from choir.errors import ChoirError

app = typer.Typer(
    rich_markup_mode=None,
    name="choirctl",
    help="Administer choir: set up $CHOIR_HOME, validate config, manage secrets and agents.\n\n"
    "Exit codes: 0 ok, 1 error, 2 usage, 3 invalid config, 4 not found, 5 conflict, "
    "6 service unavailable.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _register() -> None:
    from choir.ctl import agent, config, init, schema, secret
    from choir.ctl.operator_nouns import register_operator_nouns

    app.command("init")(init.init)
    app.add_typer(config.app, name="config")
    app.add_typer(secret.app, name="secret")
    app.add_typer(agent.app, name="agent")
    app.command("schema")(schema.schema)
    register_operator_nouns(app)


def main() -> None:
    _register()
    try:
        app()
    except ChoirError as err:
        print_error(err)
        sys.exit(int(err.exit_code))
    except KeyboardInterrupt:
        sys.exit(130)
