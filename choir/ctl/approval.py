"""`choirctl approval`: list, show and answer what agents proposed (§8.10, §19.6)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from choir.commands import documented
from choir.ctl.options import HomeOption, JsonOption
from choir.ctl.render.output import emit, table

if TYPE_CHECKING:
    from choir.protocol.operator.views import ApprovalView

app = typer.Typer(
    rich_markup_mode=None,
    help="Answer agents' approval requests (needs choird).",
    no_args_is_help=True,
)

ApprovalArgument = Annotated[
    str, typer.Argument(help="Approval id, as `choirctl approval list` shows it.")
]


@app.command("list")
@documented("approval list")
def list_approvals(
    include_all: Annotated[
        bool, typer.Option("--all", help="Also show approved, rejected and timed-out ones.")
    ] = False,
    agent_id: Annotated[str | None, typer.Option("--agent", help="Only this agent's.")] = None,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    from choir.ctl.remote import with_choird
    from choir.ctl.render.humanize import moment

    data = with_choird(
        home,
        lambda choird: choird.approval_list(include_resolved=include_all, agent_id=agent_id),
    )
    rows = [
        (
            a.approval_id,
            a.agent_id,
            a.request_type,
            a.status,
            moment(a.created_at),
            summary(a.payload),
        )
        for a in data.approvals
    ]
    headers = ("id", "agent", "type", "status", "created", "summary")
    emit(data, as_json, lambda: table(headers, rows))


def summary(payload: dict[str, Any]) -> str:
    """The proposal's own summary if it has one, else its payload on one line."""
    from choir.ctl.render.humanize import compact

    text = payload.get("summary") or payload.get("description")
    return str(text)[:60] if text else compact(payload, 60)


@app.command("show")
@documented("approval show")
def show(
    approval_id: ApprovalArgument, home: HomeOption = None, as_json: JsonOption = False
) -> None:
    from choir.ctl.remote import with_choird

    data = with_choird(home, lambda choird: choird.approval_show(approval_id))
    emit(data, as_json, lambda: _show(data))


def _show(data: ApprovalView) -> None:
    import orjson

    from choir.ctl.render.humanize import dash, moment

    resolved = (
        f"{data.status} by {data.resolved_by} at {moment(data.resolved_at)}"
        if data.resolved_at
        else data.status
    )
    lines = [
        f"{'approval':<10}{data.approval_id}",
        f"{'agent':<10}{data.agent_id} (session {dash(data.session_id)})",
        f"{'type':<10}{data.request_type}",
        f"{'created':<10}{moment(data.created_at)}",
        f"{'status':<10}{resolved}",
        "payload:",
        orjson.dumps(data.payload, option=orjson.OPT_INDENT_2).decode(),
    ]
    print("\n".join(lines))


@app.command("approve")
@documented("approval approve")
def approve(
    approval_id: ApprovalArgument, home: HomeOption = None, as_json: JsonOption = False
) -> None:
    from choir.ctl.remote import with_choird

    data = with_choird(home, lambda choird: choird.approval_approve(approval_id))
    emit(data, as_json, lambda: print(f"approval {approval_id} approved"))


@app.command("reject")
@documented("approval reject")
def reject(
    approval_id: ApprovalArgument, home: HomeOption = None, as_json: JsonOption = False
) -> None:
    from choir.ctl.remote import with_choird

    data = with_choird(home, lambda choird: choird.approval_reject(approval_id))
    emit(data, as_json, lambda: print(f"approval {approval_id} rejected"))


@app.command("extend")
@documented("approval extend")
def extend(
    approval_id: ApprovalArgument,
    amount: Annotated[
        int,
        typer.Argument(min=1, help="How much more of the budget: steps, tool calls, tokens or ms."),
    ],
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    from choir.ctl.remote import with_choird

    data = with_choird(home, lambda choird: choird.approval_extend(approval_id, amount))
    budget = data.payload.get("budget", "the budget")
    emit(data, as_json, lambda: print(f"approval {approval_id}: {budget} extended by {amount}"))
