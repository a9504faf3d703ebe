"""`choirctl init`: first-time setup of $CHOIR_HOME (§6.2)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from choir.commands import documented
from choir.ctl.options import HomeOption, JsonOption, home_of
from choir.ctl.render.output import emit

if TYPE_CHECKING:
    from choir.config import InitResult
    from choir.config.scaffolding.home_setup import RepoOutcome

ForceOption = Annotated[
    bool,
    typer.Option(
        "--force",
        help="Overwrite an existing config.json. secrets.json and existing repositories are kept.",
    ),
]
GlobalRepoOption = Annotated[
    str | None,
    typer.Option(
        "--global-repo",
        help="Where to create the global repo of tools, skills and identity "
        "(default $CHOIR_HOME/sources/global). An existing git repository there is kept.",
        show_default=False,
    ),
]

NEXT_STEPS = [
    "choirctl config check                  validate config.json and secrets.json",
    "choirctl secret set openrouter-key     store an API key (reads the value from stdin)",
    'add a real model under "models" in config.json, e.g. "sonnet": {"provider": "openrouter", '
    '"model": "anthropic/claude-sonnet-4", "endpoint": "https://openrouter.ai/api/v1", '
    '"secret": "openrouter-key"}, and set agents.agent-1.defaults.llm to "sonnet"',
    'optional: a Telegram bot under "gateways" ({"type": "telegram", "secret": "<name>"}) '
    'with a DM under "dms"; an external Postgres under "postgres" (embedded by default)',
    "choirctl agent init <agent-id>         scaffold another agent",
]


@documented("init")
def init(
    home: HomeOption = None,
    force: ForceOption = False,
    global_repo: GlobalRepoOption = None,
    as_json: JsonOption = False,
) -> None:
    from choir.config import init_home

    repo = Path(global_repo).expanduser().absolute() if global_repo else None
    result = init_home(home_of(home), force=force, global_repo=repo)
    emit(_data(result), as_json, lambda: _show(result))


def _repo_data(outcome: RepoOutcome) -> dict[str, Any]:
    return {"path": str(outcome.path), "created": outcome.created, "commit": outcome.commit}


def _data(result: InitResult) -> dict[str, Any]:
    home = result.home
    return {
        "home": str(home.root),
        "config_file": str(home.config_file),
        "config_replaced": result.config_replaced,
        "secrets_file": str(home.secrets_file),
        "secrets_created": result.secrets_created,
        "global_repo": _repo_data(result.global_repo),
        "agent_repos": {agent: _repo_data(o) for agent, o in result.agent_repos.items()},
        "next_steps": NEXT_STEPS,
    }


def _repo_line(label: str, outcome: RepoOutcome) -> str:
    if not outcome.created:
        return f"  {label:<8}{outcome.path} (existing repository kept)"
    return f"  {label:<8}{outcome.path} (new repository, commit {(outcome.commit or '')[:12]})"


def _show(result: InitResult) -> None:
    home = result.home
    config_note = "replaced" if result.config_replaced else "new"
    secrets_note = "new, mode 0600" if result.secrets_created else "kept"
    lines = [
        f"choir home ready at {home.root}",
        f"  {'config':<8}{home.config_file} ({config_note})",
        f"  {'secrets':<8}{home.secrets_file} ({secrets_note})",
        _repo_line("global", result.global_repo),
        *(_repo_line(agent, o) for agent, o in result.agent_repos.items()),
        "",
        "Next steps:",
        *(f"  {n}. {step}" for n, step in enumerate(NEXT_STEPS, start=1)),
    ]
    print("\n".join(lines))
