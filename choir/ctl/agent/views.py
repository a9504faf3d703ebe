"""How `choirctl agent` shows an agent: its runtime, a start, its detailed status."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from choir.protocol.operator.answers import (
        AgentStarted,
        AgentStatus,
        AgentStopped,
        SpendView,
    )
    from choir.protocol.operator.views import AgentSummary, HeldView, LockWaitView, OutageView


def runtime_label(agent: AgentSummary) -> str:
    """`process (bwrap)`, `process (unsandboxed)`, `docker (sandboxed)`; `-` when the agent is
    not running here."""
    runtime = agent.runtime
    if not runtime:
        return "-"
    return f"{runtime} ({sandbox_word(runtime, agent.sandboxed)})"


def sandbox_word(runtime: str | None, sandboxed: bool | None) -> str:
    """How an agent is confined: `bwrap` (the process runtime's sandbox), `sandboxed` (a
    container), or `unsandboxed`."""
    if not sandboxed:
        return "unsandboxed"
    return "bwrap" if runtime == "process" else "sandboxed"


def image_label(image: dict[str, Any] | None) -> str:
    """`<image_version> (global <sha>, agent <sha>)`: what the agent was last started from."""
    if not image:
        return "-"
    commits = f"global {image['global_repo_commit'][:12]}, agent {image['agent_repo_commit'][:12]}"
    return f"{image['image_version']} ({commits})"


def spend_line(spend: SpendView) -> str:
    """`today $0.0123 of $5.00, this month $0.4000 (UTC); 2 calls of unknown cost`."""

    from choir.core.spend import usd as money

    def against(usd: float, cap: float | None) -> str:
        return money(usd) + (f" of {money(cap)}" if cap is not None else "")

    unknown = spend.unknown_cost_calls
    return (
        f"today {against(spend.day_usd, spend.day_cap_usd)}, this month "
        f"{against(spend.month_usd, spend.month_cap_usd)} (UTC)"
        + (f"; {unknown} call{'s' if unknown > 1 else ''} of unknown cost" if unknown else "")
    )


def show_status(data: AgentStatus) -> None:
    """`agent status` for an operator: one line per aspect, then the lanes."""
    from choir.ctl.agent.verify import verified_label
    from choir.ctl.render.humanize import dash, duration, moment
    from choir.ctl.render.output import table

    behind = " (behind: it fetches on its next heartbeat)" if data.config_behind else ""
    version = data.config_version
    bindings = " ".join(f"{role}={name}" for role, name in data.bindings.items() if name)
    remaining = ", ".join(f"{k} {v}" for k, v in data.budget_remaining.items())
    lines = [
        f"{data.agent_id}  {data.state}"
        + (f"  session {data.session_id} ({data.session_status})" if data.session_id else ""),
        f"{'runtime':<11}{runtime_label(data)}" + (f", pid {data.pid}" if data.pid else ""),
        *([f"{'link':<11}{data.link}"] if data.link else []),
        f"{'image':<11}{image_label(data.image)}",
        f"{'security':<11}{verified_label(data.verified, sandboxed=data.sandboxed)}",
        f"{'uptime':<11}{duration(data.uptime_s)}",
        f"{'config':<11}{'v' + str(version) if version is not None else '-'} "
        f"(latest v{data.config_version_latest}){behind}",
        f"{'heartbeat':<11}{moment(data.last_heartbeat_at)} (rev {dash(data.ack_rev)})",
        f"{'skill':<11}{dash(data.skill)}",
        f"{'bindings':<11}{bindings}",
        f"{'budgets':<11}" + ", ".join(f"{k} {v}" for k, v in data.budgets.items()),
        f"{'remaining':<11}{remaining or '-'}",
        *unavailable_lines(data.unavailable_tools),
        *held_job_lines(data.held_jobs or []),
        *([f"{'DOWN':<11}{outage_line(data.interrupted)}"] if data.interrupted else []),
        *([f"{'spend':<11}{spend_line(data.spend)}"] if data.spend is not None else []),
        *(
            [f"{'CAP':<11}{data.spend.cap_reached}"]
            if data.spend and data.spend.cap_reached
            else []
        ),
        "lanes:",
    ]
    print("\n".join(lines))
    table(
        ("lane", "state", "skill", "step", "reported"),
        [
            (
                lane.lane,
                lane.state,
                dash(lane.skill),
                dash(lane.step),
                moment(lane.reported_at),
            )
            for lane in data.lanes
        ],
    )
    if data.lock_wait is not None:
        print(f"{'lock wait':<11}{lock_wait_line(data.lock_wait)}")
    if data.tools is not None:
        print("tools (latest session):")
        table(
            ("tool", "calls", "failed", "p50", "p95", "max", "lock wait"),
            [
                (
                    t.tool,
                    t.calls,
                    t.failed,
                    ms(t.p50_ms),
                    ms(t.p95_ms),
                    ms(t.max_ms),
                    ms(t.lock_wait_ms),
                )
                for t in data.tools
            ],
        )


def ms(value: int) -> str:
    """`850 ms`, `2.4 s`: a duration as an operator reads it."""
    return f"{value} ms" if value < 1000 else f"{value / 1000:.1f} s"


def lock_wait_line(waits: LockWaitView) -> str:
    """`2 of 9 calls waited, 1.2 s in all (p95 40 ms, max 1.1 s)`: the session's lock waits."""
    if not waits.calls:
        return "no tool call yet"
    return (
        f"{waits.waited} of {waits.calls} calls waited, {ms(waits.total_ms)} in all "
        f"(p95 {ms(waits.p95_ms)}, max {ms(waits.max_ms)})"
    )


def unavailable_lines(unavailable: dict[str, str]) -> list[str]:
    """`tools` lines: the tools the model is not offered, those sharing a reason on one line."""
    from choir.protocol.operator.answers import unavailable_by_reason

    grouped = unavailable_by_reason(unavailable)
    lines = [f"{', '.join(names)} not offered: {why}" for why, names in grouped]
    return [f"{'tools' if i == 0 else '':<11}{line}" for i, line in enumerate(lines)]


def outage_line(outage: OutageView) -> str:
    """`agent-1 crashed 4 s ago (why): <the command> resumes session s-… (…)`: one agent down."""
    return down_line(outage.agent_id, outage.status, outage.ended_at, outage.reason, outage.hint)


def down_line(agent_id: str, status: str, ended_at: str | None, reason: str, hint: str) -> str:
    """`outage_line` from its fields (`choirctl status` reads them from the JSON answer)."""
    from choir.ctl.render.humanize import ago

    when = f" {ago(ended_at)}" if ended_at else ""
    return f"{agent_id} {status}{when} ({reason}): {hint}"


def outage_lines(agents: list[AgentSummary]) -> list[str]:
    """Under `agent list`: every agent that is down, and what brings it back."""
    return [outage_line(agent.interrupted) for agent in agents if agent.interrupted]


def stopped_lines(stopped: AgentStopped) -> list[str]:
    """What a stop prints: the session's end, and its summary (§11.8) unless it needs a warning
    (`summary_warning`)."""
    first = f"{stopped.agent_id} stopped: session {stopped.session_id} {stopped.status}"
    lines = [first + exit_note(stopped.exit_code)]
    summary = stopped.summary
    if summary and not summary.warn:
        lines.append(f"summary: {summary.detail}")
    return lines


def exit_note(code: int | None) -> str:
    """How the stopped process exited, when it did not exit cleanly or nobody knows: an agent
    choird adopted after a restart (or one run by hand) is not its child, so its code is unknown."""
    if code is None:
        return " (exit code unknown)"
    return "" if code == 0 else f" (exit code {code})"


def summary_warning(stopped: AgentStopped) -> str | None:
    """The warning for a stop whose session summary went missing, if it did."""
    summary = stopped.summary
    if not summary or not summary.warn:
        return None
    return f"{stopped.agent_id} has no session summary: {summary.detail}"


def held_job_lines(held: list[HeldView]) -> list[str]:
    """An agent's core jobs held after a crash, each with the command that decides it."""
    return [
        f"{'HELD':<11}core job {job.job_name}: {job.state}; decide with {job.hint}" for job in held
    ]


def started_lines(data: AgentStarted) -> list[str]:
    """What `agent start` prints: the session, the runtime (and whether it is sandboxed), and
    what a keyed start sealed that was written before its memory was marked encrypted."""
    how = "resumed" if data.resumed else "new"
    sandbox = sandbox_word(data.runtime, data.sandboxed)
    bindings = " ".join(f"{role}={name}" for role, name in data.bindings.items() if name)
    return [
        f"{data.agent_id} started: session {data.session_id} ({how})",
        f"runtime: {data.runtime} ({sandbox}), pid {data.pid}",
        f"bindings: {bindings}",
        *data.memory_sealed,
    ]
