"""Options shared by every choirctl command."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from choir.home import ChoirHome

HomeOption = Annotated[
    str | None,
    typer.Option(
        "--home",
        envvar="CHOIR_HOME",
        help="choir state directory (default ~/.choir.d).",
        show_default=False,
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]
"""Paths are taken as `str`: typer converts `Path` options through pydantic, whose import alone
costs ~70 ms — most of choirctl's start-up budget."""


def home_of(path: str | Path | None) -> ChoirHome:
    return ChoirHome.resolve(path)
