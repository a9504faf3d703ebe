"""`choirctl --help` without typer or any noun module: the root help from a static table.

Building the typer tree imports every noun module and typer itself (~100 ms); this page is all
`choirctl`, `choirctl -h` and `choirctl --help` print, so `choir.ctl.app.main` prints it from
here. `tests/ctl/test_root_help.py` checks it is exactly what typer prints for the full tree:
change a noun's help and that test names the line to update here.
"""

from __future__ import annotations

import shutil
import textwrap

ROOT_HELP = (
    "Administer choir: set up $CHOIR_HOME, validate config, manage secrets and agents.\n\n"
    "Exit codes: 0 ok, 1 error, 2 usage, 3 invalid config, 4 not found, 5 conflict, "
    "6 service unavailable, 130 interrupted (Ctrl-C)."
)
NOUNS = (
    ("init", "Set up $CHOIR_HOME so that `choir up` runs with no editing."),
    ("schema", "Print the JSON Schema of a protocol model, or list the..."),
    ("status", "Show choird's health: version, uptime, config version,..."),
    ("chat", "Chat with an agent over the console DM (no Telegram bot..."),
    ("logs", "Print choird's or an agent's log, then follow it like tail..."),
    ("usage", "Show LLM calls, tokens and cost per UTC day, model, agent or..."),
    ("config", "Validate the configuration in $CHOIR_HOME; load and apply it..."),
    ("secret", "Manage named secrets in $CHOIR_HOME/secrets.json."),
    ("agent", "Define and manage agents."),
    ("choird", "Restart choird in place; agents keep running (needs choird)."),
    ("session", "Inspect agent sessions and steer their core jobs (needs..."),
    ("approval", "Answer agents' approval requests (needs choird)."),
    ("tool", "Register the implementation of an approved tool proposal..."),
    ("workspace", "List and reset workspaces (needs choird)."),
    ("model", "List models and switch an agent's model (needs choird)."),
    ("voice", "List voice profiles and switch an agent's (needs choird)."),
    ("memory", "Search agents' memory and see what it holds (needs choird)."),
    ("knowledge", "Read and write agents' knowledge (needs choird)."),
    ("gateway", "Show the console DM and Telegram bots (needs choird)."),
    ("inbox", "What waits for a decision after a restart: the recovery..."),
)
"""Each noun and its one-line help as click shortens it for an 80-column page, in typer's order
(commands, then groups)."""
WIDTH = 78
"""click's page width on a terminal of 80 columns or more (its maximum, less a margin)."""


def fits() -> bool:
    """Whether the page is the one for this terminal: narrower ones wrap differently."""
    return shutil.get_terminal_size().columns >= WIDTH + 2


def page() -> str:
    """The root help page, as click formats it."""
    about = "\n\n".join(
        textwrap.fill(paragraph, WIDTH, initial_indent="  ", subsequent_indent="  ")
        for paragraph in ROOT_HELP.split("\n\n")
    )
    column = max(len(name) for name, _ in NOUNS) + 2
    commands = "\n".join(f"  {name:<{column}}{text}" for name, text in NOUNS)
    return (
        "Usage: choirctl [OPTIONS] COMMAND [ARGS]...\n\n"
        f"{about}\n\n"
        "Options:\n"
        "  -h, --help  Show this message and exit.\n\n"
        f"Commands:\n{commands}\n"
    )
