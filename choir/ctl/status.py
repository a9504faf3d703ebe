"""`choirctl status`: choird health at a glance — config, Postgres, agents, approvals (§17.1)."""

from __future__ import annotations

from typing import Any

from choir.commands import documented
from choir.ctl.options import HomeOption, JsonOption
from choir.ctl.render.output import emit


@documented("status")
def status(home: HomeOption = None, as_json: JsonOption = False) -> None:
    from choir.ctl.remote import with_choird
    from choir.protocol.operator.verbs import OperatorVerb

    # the answer as JSON, not `StatusAnswer`: importing pydantic and the answer models would
    # cost this command a third of its 150 ms budget (bench.cli_start); its shape is
    # `choir.protocol.operator.answers.StatusAnswer` (golden: operator.json)
    data = with_choird(home, lambda choird: choird.call(OperatorVerb.STATUS))
    emit(data, as_json, lambda: print("\n".join(status_lines(data))))


def status_lines(data: dict[str, Any]) -> list[str]:
    from choir.ctl.render.humanize import duration

    postgres = data["postgres"]
    agents = data["agents"]
    running = "?" if agents["running"] is None else agents["running"]
    pending = data["approvals_pending"]
    gateways = "; ".join(f"{g['name']} ({g['type']}): {g['state']}" for g in data["gateways"])
    health = (
        f"ok ({postgres['latency_ms']} ms)"
        if postgres["state"] == "ok"
        else f"DEGRADED: {postgres['reason']}"
    )
    disk = data.get("disk") or {"state": "ok"}
    staged = "a config is staged (choirctl config diff)" if data["config_staged"] else "none staged"
    return [
        f"choird {data['version']}, up {duration(data['uptime_s'])}",
        f"{'config':<10}v{data['config_version']} (hash {data['config_hash'][:12]}), {staged}",
        *pending_lines(data.get("config_pending") or []),
        f"{'postgres':<10}{health}",
        *(
            [f"{'disk':<10}{disk['state'].upper()}: {disk['reason']}"]
            if disk["state"] != "ok"
            else []
        ),
        f"{'agents':<10}{running} of {agents['total']} running",
        f"{'approvals':<10}{'?' if pending is None else pending} pending",
        *held_lines(data.get("held_jobs")),
        *interrupted_lines(agents.get("interrupted")),
        *reembed_lines(data.get("memory_reembed")),
        f"{'gateways':<10}{gateways or 'none configured'}",
        *([f"{'repos':<10}{repos_line(data['repos'])}"] if data.get("repos") else []),
        f"{'socket':<10}{data['sockets']['operator']}",
    ]


def pending_lines(pending: list[str]) -> list[str]:
    """Applied config changes that run only after a choird restart, each with its command."""
    if not pending:
        return []
    return [f"{'':<10}{len(pending)} change(s) pending until choird restarts:"] + [
        f"{'':<12}{line}" for line in pending
    ]


def interrupted_lines(interrupted: list[dict[str, Any]] | None) -> list[str]:
    """Agents down after a crash (or a fork, or a restart that did not start them): each with
    its cause, when, and the command that brings it back."""
    from choir.ctl.agent.views import down_line

    return [
        f"{'DOWN':<10}"
        + down_line(o["agent_id"], o["status"], o.get("ended_at"), o["reason"], o["hint"])
        for o in interrupted or []
    ]


def held_lines(held: dict[str, Any] | None) -> list[str]:
    """Core jobs held after a crash: how many, each one, and the command that decides."""
    if not held or not held["count"]:
        return []
    lines = [f"{'held':<10}{held['count']} core job(s) wait for a decision: {held['hint']}"]
    for job in held["jobs"]:
        who = f"{job['agent_id']} " if job["agent_id"] else ""
        lines.append(f"{'':<10}{who}{job['session_id']} {job['job_name']}: {job['state']}")
    return lines


def repos_line(repos: list[dict[str, Any]]) -> str:
    """How many repos, and which clones are stale (their last fetch failed)."""
    local = sum(bool(repo["local"]) for repo in repos)
    line = f"{len(repos)} ({local} local, {len(repos) - local} cloned)"
    stale = [repo["key"] for repo in repos if repo["stale"]]
    if stale:
        line += f"; STALE: {', '.join(stale)} (last fetch failed; choirctl config load retries)"
    return line


def reembed_lines(stale: list[dict[str, Any]] | None) -> list[str]:
    """Agents whose memory vectors came from another embedding model, and the command."""
    return [
        f"{'memory':<10}{s['agent_id']}'s vectors are {s['model']} ({s['dims']} dimensions), "
        f"not the configured model's: searched by text until choirctl memory reembed "
        f"{s['agent_id']}"
        for s in stale or []
    ]
