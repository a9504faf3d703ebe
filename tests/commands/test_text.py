"""How a DM says choird's answers: readable lines, never JSON."""

from __future__ import annotations

import orjson

from choir.commands.text import (
    approval_lines,
    cut,
    event_lines,
    progress_line,
    readable,
    status_lines,
)
from choir.protocol.operator.answers import AgentReembedded, UpdateOutcome
from choir.protocol.operator.items import Progress


def test_nested_answers_keep_their_indentation_and_lists_read_one_item_a_line() -> None:
    answer = {
        "session_id": "s-1",
        "bindings": {"llm": "demo", "voice_profile": None},
        "cores": [{"job_name": "a", "state": "CORE_RUNNING", "done": False}],
        "approvals": [],
    }
    assert readable(answer) == [
        "session_id: s-1",
        "bindings:",
        "  llm: demo",
        "  voice_profile: -",
        "cores:",
        "- job_name=a · state=CORE_RUNNING · done=no",
        "approvals: none",
    ]


def test_long_lines_are_cut_and_whitespace_collapsed_after_the_indent() -> None:
    assert cut("  a\n  b", 80) == "  a b"
    assert cut("x" * 200, 10) == "x" * 9 + "…"


def test_a_status_reads_in_a_few_lines() -> None:
    status = {
        "agent_id": "agent-1", "state": "running", "session_id": "s-1",
        "session_status": "active", "uptime_s": 61.4, "runtime": "process",
        "bindings": {"llm": "demo", "dm": "console", "email": None}, "skill": None,
        "lanes": [{"lane": "edge", "state": "EDGE_IDLE", "step": None, "skill": None},
                  {"lane": "core:a", "state": "CORE_RUNNING", "step": 3, "skill": "triage"}],
        "budgets": {"total_session_tokens": 100}, "budget_remaining": {"total_session_tokens": 40},
        "config_behind": False, "held_jobs": [],
    }  # fmt: skip
    assert status_lines(status) == [
        "agent-1: running, session s-1 (active), up 61 s",
        "runtime process · llm demo · dm console",
        "skill: -",
        "- edge: EDGE_IDLE",
        "- core:a: CORE_RUNNING, skill triage, step 3",
        "tokens left: 40 of 100",
    ]
    assert status_lines({"agent_id": "agent-2", "state": "stopped"}) == [
        "agent-2: stopped",
        "skill: -",
    ]


def test_events_and_approvals_one_line_each_approvals_numbered() -> None:
    events = [{"rev": 4, "lane": "edge", "event_type": "user_msg", "payload": {"text": "hi"}}]
    assert event_lines(events) == ["#4 edge user_msg: hi"]
    assert event_lines([]) == ["no events yet"]
    approvals = [
        {"approval_id": "ap-1", "agent_id": "a", "request_type": "t", "payload": {"summary": "x"}},
        {"approval_id": "ap-2", "agent_id": "b", "request_type": "t", "payload": {}},
    ]
    assert approval_lines(approvals) == ["1. ap-1 a t: x", "2. ap-2 b t: -"]


def test_progress_items_read_the_same_from_a_model_and_from_its_json() -> None:
    items = [
        Progress(agent_id="agent-1", phase="build", step=3, total=9, title="RUN pip", detail="ok"),
        Progress(agent_id="agent-1", phase="build", log="Step 3/9 : RUN pip"),
        Progress(agent_id="agent-1", phase="stop", title="stopping"),
        Progress(
            agent_id="agent-1",
            phase="outcome",
            outcome=UpdateOutcome(agent_id="agent-1", outcome="built", reason="image rebuilt"),
        ),
        Progress(agent_id="agent-2", phase="reembed", step=512, total=569, title="vectors"),
        Progress(
            agent_id="agent-2",
            phase="reembedded",
            reembedded=AgentReembedded(
                agent_id="agent-2",
                model="m2",
                dims=16,
                previous_model="m1",
                previous_dims=16,
                embedded=569,
            ),
        ),
    ]
    lines = [progress_line(item.model_dump(mode="json")) for item in items]
    assert lines == [
        "agent-1: build step 3/9 RUN pip: ok",
        "  | Step 3/9 : RUN pip",
        "agent-1: stopping",
        "agent-1 built: image rebuilt",
        f"agent-2: re-embedded [{'#' * 27}...] 512/569 vectors (90%)",
        "agent-2: re-embed finished, 569 vectors of m2 (16) stored",
    ]
    assert lines == [progress_line(orjson.loads(item.model_dump_json())) for item in items]
