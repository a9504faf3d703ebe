"""`choirctl schema [NAME]`: print the JSON Schema of a protocol model.

For authors of tools, skills and clients: `choirctl schema tool-manifest` shows exactly what a
`tools/<name>.json` must look like; `choirctl schema operator.agent.start.answer` what
`choirctl agent start --json` prints. The protocol package is imported only when the command runs,
so other commands start fast.
"""

from __future__ import annotations

from typing import Annotated

import typer

from choir.commands import documented
from choir.ctl.render.output import emit_json
from choir.errors import NotFoundError


@documented("schema")
def schema(
    name: Annotated[
        str | None,
        typer.Argument(
            help="Schema to print, e.g. tool-manifest or operator.status.answer; omit to list "
            "every name."
        ),
    ] = None,
) -> None:
    from choir.protocol import schemas

    names = schemas.schema_names()
    if name is None:
        for known in names:
            print(known)
        return
    if name not in schemas.SCHEMAS:
        raise NotFoundError(f"unknown schema {name!r} (known: {', '.join(names)})")
    emit_json(schemas.json_schema(name))
