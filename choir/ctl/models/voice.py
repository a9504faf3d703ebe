"""`choirctl voice`: the named voice profiles; switch a running agent's voice (§17.1, §21.3)."""

from __future__ import annotations

from typing import Annotated

import typer

from choir.commands import documented
from choir.ctl.options import HomeOption, JsonOption
from choir.ctl.render.output import emit, table

app = typer.Typer(
    rich_markup_mode=None,
    help="List voice profiles and switch an agent's (needs choird).",
    no_args_is_help=True,
)

AgentArgument = Annotated[str, typer.Argument(help="Agent id.", show_default=False)]


@app.command("list")
@documented("voice list")
def list_voices(home: HomeOption = None, as_json: JsonOption = False) -> None:
    from choir.ctl.remote import with_choird

    data = with_choird(home, lambda choird: choird.voice_list())
    rows = [(v.name, v.tts, v.voice_id, v.output_format) for v in data.voice_profiles]
    emit(data, as_json, lambda: table(("name", "tts", "voice id", "format"), rows))


@app.command("get")
@documented("voice get")
def get(agent_id: AgentArgument, home: HomeOption = None, as_json: JsonOption = False) -> None:
    from choir.ctl.models.model import current_lines
    from choir.ctl.remote import with_choird

    data = with_choird(home, lambda choird: choird.voice_get(agent_id))
    emit(data, as_json, lambda: print("\n".join(current_lines(data, llm=False))))


@app.command("set")
@documented("voice set")
def set_voice(
    agent_id: AgentArgument,
    name: Annotated[str, typer.Argument(help="Profile name from `choirctl voice list`.")],
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    from choir.ctl.models.model import switched_line
    from choir.ctl.remote import with_choird

    data = with_choird(home, lambda choird: choird.voice_set(agent_id, name))
    emit(data, as_json, lambda: print(switched_line(data)))
