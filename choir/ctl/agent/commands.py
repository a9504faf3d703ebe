"""`choirctl agent`: agent definitions and lifecycle (§17.1).

`agent init` (§17.8) edits config.json offline; `agent list`, `agent status`, `agent start`
and `agent stop` ask choird; `restart`, `update` and `update-all` live in `agent_lifecycle`,
`build` in `agent_build`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from choir.commands import documented
from choir.ctl.agent import build as agent_build
from choir.ctl.agent import lifecycle as agent_lifecycle
from choir.ctl.agent import verify as agent_verify
from choir.ctl.options import HomeOption, JsonOption, home_of
from choir.ctl.render.output import emit, warn

if TYPE_CHECKING:
    from choir.config import AgentInitResult

app = typer.Typer(rich_markup_mode=None, help="Define and manage agents.", no_args_is_help=True)


def _name_option(flag: str, what: str) -> Any:
    return typer.Option(flag, help=f"Default {what} (a name from config.json).", show_default=False)


AgentIdArgument = Annotated[
    str,
    typer.Argument(
        help="New agent id: a lowercase letter, then up to 30 of a-z, 0-9, '-', '_'.",
        show_default=False,
    ),
]
RepoOption = Annotated[
    str,
    typer.Option(
        "--repo",
        help="Per-agent repo URL or local path. Empty: a new local repository at "
        "$CHOIR_HOME/sources/agents/<agent-id>. A local path is scaffolded as a git repository; "
        "for a remote URL you are told how to create it.",
        show_default=False,
    ),
]


@app.command("init")
@documented("agent init")
def init(
    agent_id: AgentIdArgument,
    repo: RepoOption = "",
    workspace: Annotated[str, _name_option("--workspace", "workspace")] = "",
    llm: Annotated[str, _name_option("--llm", "model")] = "",
    git_identity: Annotated[str, _name_option("--git-identity", "git identity")] = "",
    dm: Annotated[str, _name_option("--dm", "DM")] = "",
    voice_profile: Annotated[str, _name_option("--voice-profile", "voice profile")] = "",
    notion: Annotated[str, _name_option("--notion", "Notion integration")] = "",
    email: Annotated[str, _name_option("--email", "email account")] = "",
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    from choir.config import init_agent

    defaults = {
        "workspace": workspace,
        "llm": llm,
        "voice_profile": voice_profile,
        "git_identity": git_identity,
        "notion": notion,
        "email": email,
        "dm": dm,
    }
    result = init_agent(home_of(home), agent_id, repo=repo, defaults=defaults)
    emit(_data(result), as_json, lambda: _show(result))


def remote_instructions(result: AgentInitResult) -> list[str]:
    """How to create a remote per-agent repo with the scaffold (§17.8 step 2)."""
    return [
        f"create an empty repository at {result.repo_url}, then populate it:",
        f"  git clone {result.repo_url} {result.agent_id} && cd {result.agent_id}",
        "  mkdir -p identity tools skills && touch tools/.gitkeep skills/.gitkeep",
        "  printf 'FROM choir-base\\n' > Dockerfile",
        "  write identity/SOUL.md and identity/SOUL-CORE.md (they override the global ones)",
        "  git add -A && git commit -m 'Scaffold agent' && git push origin HEAD:main",
    ]


def _data(result: AgentInitResult) -> dict[str, Any]:
    return {
        "agent_id": result.agent_id,
        "config_file": str(result.config_file),
        "repo_url": result.repo_url,
        "repo_path": str(result.repo_path) if result.repo_path else None,
        "repo_created": result.repo_created,
        "commit": result.commit,
        "unset_defaults": result.unset,
        "warnings": result.warnings,
        "instructions": remote_instructions(result) if result.repo_path is None else [],
    }


def _repo_line(result: AgentInitResult) -> str:
    if result.repo_path is None:
        return f"repo: {result.repo_url} (remote: create it, see below)"
    if result.repo_created:
        return f"repo: {result.repo_path} (new repository, commit {(result.commit or '')[:12]})"
    return f"repo: {result.repo_path} (existing repository, not changed)"


def _show(result: AgentInitResult) -> None:
    print(f"agent {result.agent_id!r} added to {result.config_file}")
    print(_repo_line(result))
    if result.repo_path is None:
        print("\n".join(remote_instructions(result)))
    for message in result.warnings:
        warn(message)
    if result.unset:
        print(
            f"next: fill in agents.{result.agent_id}.defaults ({', '.join(result.unset)}) "
            f"in {result.config_file}, then run choirctl config check"
        )
    else:
        print("next: choirctl config check")


@app.command("list")
@documented("agent list")
def list_agents(home: HomeOption = None, as_json: JsonOption = False) -> None:
    from choir.ctl.agent.views import outage_lines, runtime_label
    from choir.ctl.remote import with_choird
    from choir.ctl.render.humanize import dash, duration
    from choir.ctl.render.output import table

    data = with_choird(home, lambda choird: choird.agent_list())
    rows = [
        (
            a.agent_id,
            a.state + (f", {len(a.held_jobs)} held" if a.held_jobs else ""),
            dash(a.session_id),
            duration(a.uptime_s),
            f"v{a.config_version}" if a.config_version is not None else "-",
            dash(a.bindings.get("workspace")),
            dash(a.bindings.get("llm")),
            dash(a.bindings.get("dm")),
            runtime_label(a),
        )
        for a in data.agents
    ]
    headers = ("agent", "state", "session", "uptime", "config", "workspace", "llm", "dm", "runtime")

    def show() -> None:
        table(headers, rows)
        for line in outage_lines(data.agents):  # what brings a crashed agent back
            print(line)

    emit(data, as_json, show)


@app.command("status")
@documented("agent status")
def status(
    agent_id: Annotated[str, typer.Argument(help="Agent id.", show_default=False)],
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    from choir.ctl.agent.views import show_status
    from choir.ctl.remote import with_choird

    data = with_choird(home, lambda choird: choird.agent_status(agent_id))
    emit(data, as_json, lambda: show_status(data))


def _override(flag: str, what: str) -> Any:
    return typer.Option(
        flag, help=f"Bind this {what} instead of the agent's default.", show_default=False
    )


@app.command("start")
@documented("agent start")
def start(
    agent_id: Annotated[str, typer.Argument(help="Agent id.", show_default=False)],
    dm: Annotated[
        str,
        typer.Option(
            "--dm",
            help="DM the agent talks to (required: choirctl has no DM of its own), e.g. console.",
            show_default=False,
        ),
    ],
    workspace: Annotated[str | None, _override("--workspace", "workspace")] = None,
    llm: Annotated[str | None, _override("--llm", "model")] = None,
    voice_profile: Annotated[str | None, _override("--voice-profile", "voice profile")] = None,
    git_identity: Annotated[str | None, _override("--git-identity", "git identity")] = None,
    notion: Annotated[str | None, _override("--notion", "Notion integration")] = None,
    email: Annotated[str | None, _override("--email", "email account")] = None,
    new_session: Annotated[
        bool, typer.Option("--new-session", help="Start fresh even if the last session resumes.")
    ] = False,
    resume: Annotated[
        str | None,
        typer.Option("--resume", help="Resume this session id.", show_default=False),
    ] = None,
    memory_key_file: Annotated[
        Path | None,
        typer.Option(
            "--memory-key-file",
            help="The key of the agent's encrypted memories (32 bytes, 64 hex digits or "
            "base64; - reads stdin). choird holds it in memory only: after a choird restart "
            "or agent stop the memory is locked until a start supplies it again. Items "
            "written there before the memory was marked encrypted are sealed with it.",
            show_default=False,
        ),
    ] = None,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    from choir.ctl.memory.key import read_memory_key
    from choir.ctl.remote import with_choird

    memory_key = (
        None if memory_key_file is None else read_memory_key(memory_key_file, "--memory-key-file")
    )

    overrides = {
        "workspace": workspace,
        "llm": llm,
        "voice_profile": voice_profile,
        "git_identity": git_identity,
        "notion": notion,
        "email": email,
        "dm": dm,
    }
    from choir.ctl.agent.views import started_lines

    data = with_choird(
        home,
        lambda choird: choird.agent_start(
            agent_id, overrides, new_session=new_session, resume=resume, memory_key=memory_key
        ),
        call_timeout=None,  # the docker runtime may build the image first
    )
    emit(data, as_json, lambda: print("\n".join(started_lines(data))))


@app.command("stop")
@documented("agent stop")
def stop(
    agent_id: Annotated[str, typer.Argument(help="Agent id.", show_default=False)],
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    from choir.ctl.agent.views import stopped_lines, summary_warning
    from choir.ctl.remote import with_choird
    from choir.ctl.render.output import warn

    # the stop waits for the agent's safe point and summary: as long as config lets them take
    data = with_choird(home, lambda choird: choird.agent_stop(agent_id), call_timeout=None)
    emit(data, as_json, lambda: print("\n".join(stopped_lines(data))))
    if (warning := summary_warning(data)) is not None:
        warn(warning)


app.command("build")(agent_build.build)
app.command("restart")(agent_lifecycle.restart)
app.command("update")(agent_lifecycle.update)
app.command("update-all")(agent_lifecycle.update_all)
app.command("rollback")(agent_lifecycle.rollback)
app.command("verify")(agent_verify.verify)
