"""`choirctl model`: the named LLMs and TTS providers; switch a running agent's model (§17.1).

A switch lasts until the agent's next start; the agent picks it up on its next LLM call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from choir.commands import documented
from choir.ctl.options import HomeOption, JsonOption
from choir.ctl.render.output import emit, table

if TYPE_CHECKING:
    from choir.protocol.operator.answers import AgentChoices, BindingSwitched, ModelList

app = typer.Typer(
    rich_markup_mode=None,
    help="List models and switch an agent's model (needs choird).",
    no_args_is_help=True,
)

AgentArgument = Annotated[str, typer.Argument(help="Agent id.", show_default=False)]


@app.command("list")
@documented("model list")
def list_models(home: HomeOption = None, as_json: JsonOption = False) -> None:
    from choir.ctl.remote import with_choird

    data = with_choird(home, lambda choird: choird.model_list())
    emit(data, as_json, lambda: _show_list(data))


def _show_list(data: ModelList) -> None:
    table(
        ("name", "provider", "model", "note"),
        [
            (m.name, m.provider, m.model, "demo (not a real LLM)" if m.demo else "")
            for m in data.models
        ],
    )
    print("\nTTS providers:")
    table(
        ("name", "provider", "model id"),
        [(t.name, t.provider, t.model_id) for t in data.tts],
    )


@app.command("get")
@documented("model get")
def get(agent_id: AgentArgument, home: HomeOption = None, as_json: JsonOption = False) -> None:
    from choir.ctl.remote import with_choird

    data = with_choird(home, lambda choird: choird.model_get(agent_id))
    emit(data, as_json, lambda: print("\n".join(current_lines(data))))


def current_lines(data: AgentChoices, *, llm: bool = True) -> list[str]:
    """The agent, then `llm demo (demo model…)` (unless not `llm`) and `voice calm (switched…)`."""

    def line(
        label: str, current: str | None, default: str | None, overridden: bool, note: str = ""
    ) -> str:
        switched = f" (switched until restart; default {default or 'none'})" if overridden else ""
        return f"{label:<7}{current or 'none'}{note}{switched}"

    state = "running" if data.running else "not running: showing its defaults"
    demo = " (demo model, not a real LLM)" if data.llm_demo else ""
    lines = [f"{data.agent_id} ({state})"]
    if llm:
        lines.append(line("llm", data.llm, data.llm_default, data.llm_overridden, demo))
    lines.append(
        line(
            "voice",
            data.voice_profile,
            data.voice_profile_default,
            data.voice_profile_overridden,
        )
    )
    return lines


@app.command("set")
@documented("model set")
def set_model(
    agent_id: AgentArgument,
    llm: Annotated[str, typer.Option("--llm", help="Model name from `choirctl model list`.")],
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    from choir.ctl.remote import with_choird

    data = with_choird(home, lambda choird: choird.model_set(agent_id, llm))
    emit(data, as_json, lambda: print(switched_line(data)))


def switched_line(data: BindingSwitched) -> str:
    return (
        f"{data.agent_id} now uses {data.name} (was {data.previous or 'none'}) "
        f"until its next start; config v{data.config_version}"
    )
