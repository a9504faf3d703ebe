"""Options shared by every choirctl command."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from choir.home import ChoirHome

HomeOption = Annotated[
    Path | None,
    typer.Option(
        "--home",
        envvar="CHOIR_HOME",
        help="choir state directory (default ~/.choir.d).",
        show_default=False,
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]


def home_of(path: Path | None) -> ChoirHome:
    return ChoirHome.resolve(path)
