"""SVG snapshots of the action tabs and dialogs, at fixed sizes with fixed data.

The console never connects: `tests/tui/sample.py` feeds what the bridge would (two agents,
`default` running), and each test hands its tab the answers choird would have given (attributes
down), so every pixel is the same on every run. Regenerate after an intended change with
`pytest tests/tui/test_actions_snapshots.py --snapshot-update` and look at the report first.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

import orjson
from textual.pilot import Pilot
from textual.widgets import Static

from choir.protocol.operator.answers import (
    AgentMemoryStats,
    ChangeView,
    ConfigShown,
    EmbeddingView,
    MemoryHitView,
    MemoryItem,
    WorkspaceView,
)
from choir.protocol.operator.views import ApprovalView
from tests.tui.sample import NOW, SESSION, feed, sample_app
from tui.app import ChoirApp
from tui.messages import ApprovalChanged
from tui.views import spec
from tui.views.approvals import ApprovalsView
from tui.views.chat import ChatView
from tui.views.config import ConfigView
from tui.views.logs import LogsView
from tui.views.memory import MemoryView, hit_row, item_text
from tui.views.workspaces import WorkspacesView

SIZE = (110, 30)
Setup = Callable[[ChoirApp], None]


def approval(
    approval_id: str, ago: timedelta, kind: str, payload: dict[str, Any]
) -> dict[str, Any]:
    return {
        "approval_id": approval_id,
        "agent_id": "default",
        "session_id": SESSION,
        "request_type": kind,
        "status": "pending",
        "created_at": (NOW - ago).isoformat(),
        "resolved_at": None,
        "resolved_by": None,
        "payload": payload,
    }


APPROVALS = [
    approval(
        "ap-0c0ffee00001",
        timedelta(minutes=27, seconds=10),
        "config_change",
        {
            "summary": "Give operators ten minutes to answer approvals",
            "patch": {"approval_timeout_ms": 600_000, "event_window_size": None},
            "rationale": "Half an hour is too long to wait.",
        },
    ),
    approval(
        "ap-0c0ffee00002",
        timedelta(minutes=4, seconds=5),
        "tool",
        {
            "manifest": {"llm": {"name": "weather.lookup"}, "runtime": {"timeout_ms": 5000}},
            "intended_behavior": "Fetch the forecast for a city.",
            "rationale": "Operators keep asking about the weather.",
        },
    ),
]


def with_approvals(app: ChoirApp) -> None:
    view = app.query_one(ApprovalsView)
    view.timeout_ms = 1_800_000
    view.running_config = {"approval_timeout_ms": 1_800_000, "event_window_size": 50}
    for row in APPROVALS:
        app.post_message(ApprovalChanged(ApprovalView.model_validate(row)))


def with_config(app: ChoirApp) -> None:
    view = app.query_one(ConfigView)
    view.shown = ConfigShown(
        config_version=3, config_hash="9f2c4e1ab7d05e66", staged=True, config={}
    )
    view.changes = [
        ChangeView.model_validate(change)
        for change in [
            {
                "op": "~",
                "source": "config.json",
                "path": "approval_timeout_ms",
                "scope": "hot-reload",
                "action": "choirctl config apply",
            },
            {
                "op": "+",
                "source": "config.json",
                "path": "workspaces.extra",
                "scope": "restart-required",
                "action": "the next choirctl agent start that binds it",
            },
            {
                "op": "~",
                "source": "config.json",
                "path": "gateways.console",
                "scope": "restart-required",
                "action": "restart choird",
            },
        ]
    ]
    view.redraw()
    view.problems("warnings", ["model demo is the scripted demo model, not a real LLM"], "yellow")


def with_workspaces(app: ChoirApp) -> None:
    view = app.query_one(WorkspacesView)
    view.workspaces = {
        name: WorkspaceView.model_validate(row)
        for name, row in {
            "default": {
                "name": "default",
                "path": "/home/op/.choir.d/workspaces/default",
                "exists": True,
                "leased_to": "default",
                "session_id": SESSION,
                "leased_at": "2026-03-14T09:02:41+00:00",
            },
            "review": {
                "name": "review",
                "path": "/srv/review",
                "exists": False,
                "leased_to": None,
                "session_id": None,
                "leased_at": None,
            },
        }.items()
    }
    view.redraw()


def with_chat(app: ChoirApp) -> None:
    view = app.query_one(ChatView)
    for category, text in [
        ("you", "please refactor the login module and add tests"),
        ("reply", "On it: I started refactor-auth and write-tests."),
        ("injected", "tell write-tests to cover the lockout path"),
        ("core_report", "core job refactor-auth completed: login.py split into three modules."),
        ("error", "the model fell over (HTTP 500); try again"),
    ]:
        view.add("default", category, text)


def with_logs(app: ChoirApp) -> None:
    view = app.query_one(LogsView)
    records: list[tuple[str, str, str, str, dict[str, Any]]] = [
        ("09:26:01.120", "INFO", "choird.sessions", "session started", {"agent_id": "default"}),
        ("09:26:02.004", "INFO", "choird.approvals", "approval requested",
         {"approval_id": "ap-0c0ffee00002", "type": "tool"}),
        ("09:26:40.551", "WARNING", "choird.rpc", "slow heartbeat", {"ms": 812}),
    ]  # fmt: skip
    view.add(
        orjson.dumps(
            {"timestamp": f"2026-03-14T{clock}Z", "level": level, "source": "choird",
             "session_id": None, "lane": None, "logger": logger, "message": message, **fields}
        ).decode()
        for clock, level, logger, message, fields in records
    )  # fmt: skip
    view.live = True
    view.draw_title()


MEMORY_HITS = [
    ("7c1e5a2f-0b6d-4c1e-9a55-3f1d2e4b6a01", 0.0328, 1, "ran the migrations on staging: "
     "alembic upgrade head, 14 revisions applied, no errors"),
    ("2b9d0c44-5e7f-4a3b-8c21-6d0e9f1a2b02", 0.0161, 5, "the user wants release notes in "
     "British spelling, short bullet points"),
]  # fmt: skip


def with_memory(app: ChoirApp) -> None:
    view = app.query_one(MemoryView)
    view.stats = AgentMemoryStats.model_validate(
        {
            "agent_id": "default",
            "chunks": {"mid_term": 42, "long_term_summary": 3, "long_term_detail": 118},
            "sessions": {"mid_term": 10, "long_term_summary": 3, "long_term_detail": 3},
            "knowledge_items": 7,
            "vectors_missing": 2,
            "index_bytes": {"memory_embeddings_hnsw_idx": 409_600, "x": 81_920},
        }
    )
    view.embedding = EmbeddingView(
        provider="local", dimensions=256, queue_depth=0, breaker="closed"
    )
    hits = [
        MemoryHitView(
            id=item_id, store="session", score=score, text=text, session_id=SESSION,
            tier="mid_term", kind="tool_call", first_rev=rev, last_rev=rev + 1, name=None,
        )
        for item_id, score, rev, text in MEMORY_HITS
    ]  # fmt: skip
    view.show("2 hit(s) for 'migrations' (hybrid)", [hit_row(hit) for hit in hits])
    item = MemoryItem.model_validate(
        {
            "agent_id": "default",
            "store": "session",
            "chunk": {
                "id": MEMORY_HITS[0][0], "session_id": SESSION, "tier": "mid_term",
                "kind": "tool_call", "chunk_index": 0, "first_rev": 1, "last_rev": 2,
                "text": MEMORY_HITS[0][3], "has_vector": True, "created_at": NOW.isoformat(),
            },
            "knowledge": None,
            "events": [
                {"rev": rev, "lane": "edge", "event_type": kind, "created_at": NOW.isoformat(),
                 "hash": "0" * 64, "payload": payload, "artifact": None}
                for rev, kind, payload in [
                    (1, "tool_call", {"tool": "choir.exec", "input": {"command": "alembic"}}),
                    (2, "tool_result", {"text": "14 revisions applied"}),
                ]
            ],
            "events_truncated": False,
        }
    )  # fmt: skip
    app.query_one("#memory-detail", Static).update(item_text(item))


def showing(view_id: str, setup: Setup, *keys: str) -> Callable[[Pilot[None]], Awaitable[None]]:
    async def run_before(pilot: Pilot[None]) -> None:
        app = pilot.app
        assert isinstance(app, ChoirApp)
        feed(app)
        await pilot.pause()
        await pilot.press(spec(view_id).key)
        await pilot.pause()
        setup(app)
        await pilot.pause()
        await pilot.press(*keys)
        await pilot.pause()
        await pilot.pause()

    return run_before


def test_approvals_snapshot(snap_compare: Any) -> None:
    assert snap_compare(
        sample_app(), terminal_size=SIZE, run_before=showing("approvals", with_approvals)
    )


def test_approvals_at_80x24_snapshot(snap_compare: Any) -> None:
    run_before = showing("approvals", with_approvals, "down")
    assert snap_compare(sample_app(), terminal_size=(80, 24), run_before=run_before)


def test_approve_confirmation_snapshot(snap_compare: Any) -> None:
    run_before = showing("approvals", with_approvals, "a")
    assert snap_compare(sample_app(), terminal_size=SIZE, run_before=run_before)


def test_config_snapshot(snap_compare: Any) -> None:
    assert snap_compare(sample_app(), terminal_size=SIZE, run_before=showing("config", with_config))


def test_workspaces_snapshot(snap_compare: Any) -> None:
    run_before = showing("workspaces", with_workspaces)
    assert snap_compare(sample_app(), terminal_size=SIZE, run_before=run_before)


def test_chat_snapshot(snap_compare: Any) -> None:
    """Escape leaves the input (no blinking cursor in the picture; digits switch tabs again)."""
    run_before = showing("chat", with_chat, "escape")
    assert snap_compare(sample_app(), terminal_size=SIZE, run_before=run_before)


def test_logs_snapshot(snap_compare: Any) -> None:
    assert snap_compare(sample_app(), terminal_size=SIZE, run_before=showing("logs", with_logs))


def test_memory_snapshot(snap_compare: Any) -> None:
    assert snap_compare(sample_app(), terminal_size=SIZE, run_before=showing("memory", with_memory))


def test_help_snapshot(snap_compare: Any) -> None:
    run_before = showing("approvals", lambda app: None, "question_mark")
    assert snap_compare(sample_app(), terminal_size=SIZE, run_before=run_before)
