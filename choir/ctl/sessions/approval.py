"""`choirctl approval`: list, show and answer what agents proposed (§8.10, §19.6)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Final

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
        bool,
        typer.Option(
            "--all", help="Also show the answered ones (approved, applied, rejected, failed)."
        ),
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
    if data.diff and not as_json:  # after `emit`: its escapes are the only ones on the line
        print("diff:")
        print_diff(data.diff)


def _show(data: ApprovalView) -> None:
    import orjson

    from choir.ctl.render.humanize import dash, moment

    via = f" via {data.resolved_via}" if data.resolved_via else ""
    resolved = (
        f"{data.status} by {data.resolved_by}{via} at {moment(data.resolved_at)}"
        if data.resolved_at
        else data.status
    )
    lines = [
        f"{'approval':<10}{data.approval_id}",
        f"{'agent':<10}{data.agent_id} (session {dash(data.session_id)})",
        f"{'type':<10}{data.request_type}",
        f"{'created':<10}{moment(data.created_at)}",
        f"{'status':<10}{resolved}",
        *apply_lines(data),
        "payload:",
        orjson.dumps(_beside_diff(data), option=orjson.OPT_INDENT_2).decode(),
        *_audit_lines(data),
    ]
    print("\n".join(lines))


def apply_lines(data: ApprovalView) -> list[str]:
    """The content hash, the apply's step and what it applied or why it failed."""
    lines = [f"{'sha256':<10}{data.content_sha256}"] if data.content_sha256 else []
    if data.apply is not None:
        apply = data.apply
        step = f"{apply.step} (branch {apply.branch})"
        if apply.failed_step and apply.step == "implement":  # a register failed: try again
            step = (
                f"implement (branch {apply.branch}): the last register failed at "
                f"{apply.failed_step}: {apply.reason}"
            )
        elif apply.failed_step:
            step = f"failed at {apply.failed_step}: {apply.reason}"
        lines.append(f"{'apply':<10}{step}")
        if apply.commit_id:
            lines.append(f"{'commit':<10}{apply.commit_id}")
        if apply.image_id:
            lines.append(f"{'image':<10}{apply.image_id}")
    if data.outcome:
        lines.append(f"{'outcome':<10}{data.outcome}")
    return lines


def _audit_lines(data: ApprovalView) -> list[str]:
    """The audit trail: when, what, who and through which front end."""
    from choir.ctl.render.humanize import moment

    if not data.audit:
        return []
    lines = ["audit:"]
    for fact in data.audit:
        who = f" by {fact.actor}" if fact.actor else ""
        via = f" via {fact.via}" if fact.via and fact.via != fact.actor else ""
        detail = f": {fact.detail}" if fact.detail else ""
        lines.append(f"  {moment(fact.at)}  {fact.action}{who}{via}{detail}")
    return lines


DIFFED: Final = ("spec", "manifest", "patch")
"""Payload fields the diff shows (the skill spec, the tool manifest, the config patch)."""


def _beside_diff(data: ApprovalView) -> dict[str, Any]:
    """The payload without what the diff shows (its rationale, summary, intended behaviour)."""
    if not data.diff:
        return data.payload
    return {key: value for key, value in data.payload.items() if key not in DIFFED}


def print_diff(diff: str) -> None:
    """A unified diff — an agent's words, made `visible` first — in colour on a terminal
    (rich's diff lexer), as it is otherwise."""
    import sys

    from choir.ctl.render.visible import visible

    shown = visible(diff)
    if not sys.stdout.isatty():
        sys.stdout.write(shown)
        return
    from rich.console import Console
    from rich.syntax import Syntax

    Console().print(Syntax(shown, "diff", theme="ansi_dark", word_wrap=True))


@app.command("approve")
@documented("approval approve")
def approve(
    approval_id: ApprovalArgument,
    restart: Annotated[
        bool,
        typer.Option(
            "--restart",
            help="For a config change that takes effect only after a restart: apply it and "
            "restart the agents it needs (choird's own changes wait for its next start: choir "
            "restart). Without it such an approval is refused and stays pending.",
        ),
    ] = False,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    from choir.ctl.remote import with_choird

    data = with_choird(home, lambda choird: choird.approval_approve(approval_id, restart=restart))
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
