"""Fixed console data for snapshots, layout tests and the stream benchmark: what choird would
send about two agents, one running with an edge lane, two core jobs, locks and some events.

The constants are the wire form (JSON objects); the functions below parse them into the operator
API's models, as the bridge does before it posts them."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from choir.protocol.operator.answers import StatusAnswer
from choir.protocol.operator.views import AgentSummary, EventView, LaneView, LocksView
from tui.app import ChoirApp
from tui.messages import (
    AgentsUpdated,
    ConnectionChanged,
    EventsArrived,
    LaneReported,
    LocksReported,
    Resynced,
    StatusUpdated,
)

NOW = datetime(2026, 3, 14, 9, 26, 53, tzinfo=UTC)
SESSION = "s-0123456789abcdef"
BUDGETS = {
    "per_job_max_steps": 41,
    "total_session_tokens": 1_948_200,
    "max_tool_calls_per_session": 488,
}

STATUS: dict[str, Any] = {
    "version": "0.1.0",
    "started_at": "2026-03-14T08:00:00+00:00",
    "uptime_s": 5213.0,
    "config_version": 3,
    "config_hash": "9f2c4e1ab7d05e66",
    "config_staged": False,
    "postgres": {"state": "ok", "latency_ms": 0.42},
    "disk": {"state": "ok"},
    "gateways": [{"name": "console", "type": "console", "state": "running"}],
    "agents": {"total": 2, "running": 1, "interrupted": None},
    "approvals_pending": 0,
    "held_jobs": {"count": 0, "jobs": [], "hint": None},
    "repos": [],
    "sockets": {"operator": "/run/choir/operator.sock", "agents": "/run/choir/agents.sock"},
}
NOT_RUNNING: dict[str, Any] = {
    "held_jobs": [],
    "interrupted": None,
    "container": None,
    "verified": None,
}
AGENTS: list[dict[str, Any]] = [
    {
        "agent_id": "default",
        "state": "running",
        "session_id": SESSION,
        "session_status": "active",
        "started_at": "2026-03-14T09:02:41+00:00",
        "uptime_s": 1452.0,
        "config_version": 3,
        "bindings": {"dm": "console", "llm": "demo", "workspace": "default"},
        "runtime": "process",
        "sandboxed": False,
        "pid": 4242,
        **NOT_RUNNING,
    },
    {
        "agent_id": "reviewer",
        "state": "stopped",
        "session_id": "s-fedcba9876543210",
        "session_status": "stopped",
        "started_at": None,
        "uptime_s": None,
        "config_version": 2,
        "bindings": {"dm": "ops", "llm": "sonnet", "workspace": "review"},
        "runtime": None,
        "sandboxed": None,
        "pid": None,
        **NOT_RUNNING,
    },
]


def lane(
    name: str, state: str, *, skill: str | None = None, step: int | None = None
) -> dict[str, Any]:
    return {
        "session_id": SESSION,
        "lane": name,
        "state": state,
        "skill": skill,
        "step": step,
        "budget_remaining": BUDGETS,
        "reported_at": "2026-03-14T09:26:51+00:00",
        "held": None,
    }


LANES = [
    lane("edge", "EDGE_REASONING"),
    lane("core:refactor-auth", "CORE_WAITING_TOOL", skill="tdd", step=3),
    lane("core:write-tests", "CORE_REASONING", step=1),
    lane("core:docs", "CORE_COMPLETED", step=5),
]
LOCKS: dict[str, Any] = {
    "session_id": SESSION,
    "reported_at": "2026-03-14T09:26:50+00:00",
    "locks": [
        {
            "resource": "file:src/auth.py",
            "mode": "X",
            "holders": ["core:refactor-auth"],
            "waiters": [],
            "held_for_s": 4.2,
        },
        {
            "resource": "workspace",
            "mode": "S",
            "holders": ["core:refactor-auth", "edge"],
            "waiters": [{"owner": "core:write-tests", "mode": "X", "waiting_s": 1.5}],
            "held_for_s": 12.0,
        },
    ],
}


def event(rev: int, lane_id: str, kind: str, payload: dict[str, Any]) -> dict[str, Any]:
    second = 10 + rev % 40
    return {
        "rev": rev,
        "lane": lane_id,
        "event_type": kind,
        "created_at": f"2026-03-14T09:26:{second:02d}.{rev % 1000:03d}000+00:00",
        "hash": f"{rev:08x}" + "ab" * 28,
        "payload": payload,
        "artifact": None,
    }


def events() -> list[dict[str, Any]]:
    return [
        event(1, "edge", "user_msg", {"text": "Refactor auth to bcrypt and add tests"}),
        event(
            2, "edge", "model_output", {"text": "", "tool_calls": [{"name": "choir.core.spawn"}]}
        ),
        event(
            3,
            "core:refactor-auth",
            "core_started",
            {"job": {"job_name": "refactor-auth", "task_spec": "Move password hashing to bcrypt."}},
        ),
        event(
            4,
            "core:write-tests",
            "core_started",
            {"job": {"job_name": "write-tests", "task_spec": "Cover login with tests."}},
        ),
        event(
            5,
            "core:refactor-auth",
            "tool_call_committed",
            {
                "tool": "choir.fs.write",
                "side_effect": "write",
                "locks": [{"resource": "file:src/auth.py", "mode": "X"}],
            },
        ),
        event(
            6,
            "core:refactor-auth",
            "core_event_emitted",
            {
                "job_name": "refactor-auth",
                "event": {
                    "kind": "progress",
                    "phase": "edit",
                    "percent": 40.0,
                    "focus": "hash_password",
                },
            },
        ),
        event(
            7,
            "core:write-tests",
            "tool_result_committed",
            {
                "tool": "choir.fs.read",
                "result": {"status": "success", "output": "def login(...)"},
                "duration_ms": 3,
            },
        ),
        event(
            8,
            "core:docs",
            "core_stopped",
            {"job_name": "docs", "outcome": "completed", "report": "README updated."},
        ),
        event(
            9,
            "edge",
            "agent_replied",
            {"text": "Two jobs are running: refactor-auth and write-tests.", "category": "reply"},
        ),
    ]


def status(**changes: Any) -> StatusAnswer:
    """`STATUS` with `changes`, parsed."""
    return StatusAnswer.model_validate({**STATUS, **changes})


def agents(rows: list[dict[str, Any]] | None = None) -> list[AgentSummary]:
    """`AGENTS` (or `rows`), parsed."""
    return [AgentSummary.model_validate(row) for row in (AGENTS if rows is None else rows)]


def lanes() -> list[LaneView]:
    return [LaneView.model_validate(row) for row in LANES]


def locks() -> LocksView:
    return LocksView.model_validate(LOCKS)


def event_views(rows: list[dict[str, Any]] | None = None) -> list[EventView]:
    """`events()` (or `rows`), parsed."""
    return [EventView.model_validate(row) for row in (events() if rows is None else rows)]


def sample_app() -> ChoirApp:
    """A console that never connects, with `NOW` as its clock."""
    app = ChoirApp(connect=False)
    app.clock = lambda: NOW
    return app


def feed(app: ChoirApp) -> None:
    """Post what the bridge would after connecting, and a batch of events."""
    app.post_message(StatusUpdated(status()))
    app.post_message(AgentsUpdated(agents()))
    for report in lanes():
        app.post_message(LaneReported(report))
    app.post_message(LocksReported(locks()))
    app.post_message(ConnectionChanged("connected"))
    app.post_message(Resynced())
    app.post_message(EventsArrived(SESSION, event_views(), restart=True))
