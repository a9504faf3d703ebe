"""`choirctl memory`: what choird keeps of agents' memory (§11).

The commands live one per module (`memory_reembed`), registered here.
"""

from __future__ import annotations

import typer

from choir.ctl.memory_reembed import reembed

app = typer.Typer(
    rich_markup_mode=None,
    help="Search agents' memory and see what it holds (needs choird).",
    no_args_is_help=True,
)
app.command("reembed")(reembed)
