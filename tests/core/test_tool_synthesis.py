"""Tool-call synthesis (`choir.core.memory.tool_synthesis`): one past-tense sentence per call.

Every built-in tool (the seeds' `tools/global`) is described from a realistic call and result —
success and failure; the generic sentence covers any other tool; secrets, typed text, email
bodies and masked results never reach a sentence; the sentence is bounded and the same call
always gets the same one; `tool_rows` keys each call by its result's revision.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

import choir
from choir.core.memory.chunks import ChunkKind
from choir.core.memory.tool_synthesis import (
    BUILTIN_TOOLS,
    MAX_CHARS,
    describe,
    tool_descriptions,
    tool_rows,
)
from choir.protocol.log.chain import GENESIS_HASH
from choir.protocol.log.committed import CommittedEvent
from choir.protocol.log.events import (
    Event,
    ModelOutput,
    ToolCall,
    ToolResultCommitted,
    UserMsg,
)
from choir.protocol.tooling.tools import ToolResult

SEED_TOOLS = Path(choir.__file__).resolve().parent / "_seeds" / "global" / "tools"


def ok(summary: str = "done", **data: Any) -> ToolResult:
    return ToolResult.ok(summary, **data)


def failed(code: str, summary: str = "it did not work") -> ToolResult:
    return ToolResult.fail(code, summary)


# (tool, arguments, result, the sentence)
CASES: list[tuple[str, dict[str, Any], ToolResult, str]] = [
    (
        "choir.exec",
        {"command": "pytest -q"},
        ToolResult(status="success", summary="exit 0", data={"exit_code": 0}),
        "ran `pytest -q` (exit 0)",
    ),
    (
        "choir.exec",
        {"command": "make   build\n"},
        ToolResult(
            status="error", summary="exit 2", error_code="nonzero_exit", data={"exit_code": 2}
        ),
        "ran `make build` (exit 2)",
    ),
    (
        "choir.exec",
        {"command": "sleep 100", "timeout_ms": 1000},
        ToolResult(status="timeout", summary="timed out", error_code="timeout", data={}),
        "ran `sleep 100`, which timed out",
    ),
    (
        "choir.fs.read",
        {"path": "notes/todo.md"},
        ok(path="notes/todo.md", content="a\nb\n", start_line=1, end_line=2, total_lines=2),
        "read notes/todo.md (2 lines)",
    ),
    (
        "choir.fs.read",
        {"path": "src/app.py", "mode": "range", "start_line": 10, "end_line": 20},
        ok(path="src/app.py", content="…", start_line=10, end_line=20, total_lines=300),
        "read lines 10-20 of src/app.py (300 lines)",
    ),
    (
        "choir.fs.read",
        {"path": "missing.txt"},
        failed("not_found", "missing.txt does not exist"),
        "tried to read missing.txt but it failed (not_found: missing.txt does not exist)",
    ),
    (
        "choir.fs.search",
        {"pattern": "TODO", "glob": "*.py"},
        ok(match_count=7, file_count=3, matches=[]),
        "searched the workspace (*.py) for `TODO` (7 matches in 3 files)",
    ),
    (
        "choir.fs.search",
        {"pattern": "frobnicate", "path": "docs"},
        ok(match_count=0, file_count=0, matches=[]),
        "searched docs for `frobnicate` (no matches)",
    ),
    (
        "choir.fs.write",
        {"path": "notes/todo.md", "op": "overwrite", "content": "a\nb\nc\n"},
        ok(created=False, lines_after=3),
        "wrote 3 lines to notes/todo.md",
    ),
    (
        "choir.fs.write",
        {"path": "notes/new.md", "op": "overwrite", "content": "one line"},
        ok(created=True, lines_after=1),
        "created notes/new.md with 1 line",
    ),
    (
        "choir.fs.write",
        {"path": "log.txt", "op": "append", "content": "x\ny\n"},
        ok(created=False),
        "appended 2 lines to log.txt",
    ),
    (
        "choir.fs.write",
        {
            "path": "a.py",
            "op": "replace_range",
            "content": "pass\n",
            "start_line": 4,
            "end_line": 7,
        },
        ok(),
        "replaced lines 4-7 of a.py with 1 line",
    ),
    (
        "choir.fs.write",
        {"path": "a.py", "op": "insert_at", "content": "x\ny\n", "line": 5},
        failed("range_beyond_eof", "line 5 is past the end of a.py (3 lines)"),
        "tried to write to a.py but it failed (range_beyond_eof: line 5 is past the end of a.py "
        "(3 lines))",
    ),
    (
        "choir.web.search",
        {"query": "pgvector hnsw tuning"},
        ok(query="pgvector hnsw tuning", results=[{"url": "u"}, {"url": "v"}]),
        'searched the web for "pgvector hnsw tuning" (2 results)',
    ),
    (
        "choir.web.search",
        {"query": "weather"},
        failed("rate_limited", "the search provider is rate limiting this key"),
        'tried to search the web for "weather" but it failed (rate_limited: the search provider '
        "is rate limiting this key)",
    ),
    (
        "choir.web.browse",
        {"action": "open", "url": "https://example.org/docs"},
        ok(),
        "opened https://example.org/docs in the browser",
    ),
    (
        "choir.web.browse",
        {"action": "type", "selector": "#password", "value": "hunter2", "submit": True},
        ok(),
        "typed into #password in the browser",
    ),
    (
        "choir.web.browse",
        {"action": "click", "index": 3},
        ok(),
        "clicked link 3 in the browser",
    ),
    (
        "choir.memory.query",
        {"store": "session", "mode": "hybrid", "query": "deploy host"},
        ok(hits=[{"text": "a"}]),
        'searched session memory for "deploy host" (1 hit)',
    ),
    (
        "choir.memory.query",
        {"store": "working", "mode": "result", "query": "call-7"},
        ok(),
        "read the result of tool call call-7",
    ),
    (
        "choir.memory.query",
        {"store": "session", "mode": "browse", "query": "x", "session_id": "s-1", "offset": 4},
        ok(messages=[]),
        "read the messages of session s-1",
    ),
    (
        "choir.memory.query",
        {"store": "session", "mode": "stats", "query": "stats"},
        ok(),
        "checked its memory statistics",
    ),
    (
        "choir.memory.upsert",
        {"op": "rename", "name": "user.theme", "new_name": "user.ui-theme"},
        ok(),
        'renamed knowledge "user.theme" to "user.ui-theme"',
    ),
    (
        "choir.memory.upsert",
        {"op": "add", "text": "the deploy host is castor"},
        ok(name="the-deploy-host-is-castor-1a2b3c4d"),
        'stored knowledge "the-deploy-host-is-castor-1a2b3c4d"',
    ),
    ("choir.memory.compact", {}, ok(), "compacted working memory"),
    (
        "choir.core.spawn",
        {"job_name": "audit", "task_spec": "Audit the repo for unused imports"},
        ok(),
        "started core job audit to Audit the repo for unused imports",
    ),
    (
        "choir.core.cancel",
        {"job_name": "audit", "reason": "superseded"},
        ok(),
        "cancelled core job audit (superseded)",
    ),
    (
        "choir.core.inject",
        {"job_name": "audit", "content": "skip the tests directory"},
        ok(),
        'instructed core job audit: "skip the tests directory"',
    ),
    ("choir.core.list", {}, ok(jobs=[{}, {}]), "listed the core jobs (2 jobs)"),
    (
        "choir.core.report",
        {"kind": "plan", "steps": ["a", "b", "c"]},
        ok(),
        "reported a plan of 3 steps",
    ),
    (
        "choir.core.report",
        {"kind": "progress", "phase": "scanning", "percent": 40},
        ok(),
        "reported progress (scanning, 40%)",
    ),
    (
        "choir.email.send",
        {"to": ["ada@example.org"], "subject": "Invoice", "body": "secret numbers"},
        ok(),
        'sent an email "Invoice" to ada@example.org',
    ),
    ("choir.email.check", {}, ok(), "checked the INBOX mailbox"),
    (
        "choir.email.receive",
        {"folder": "Support", "unseen_only": True},
        ok(messages=[{}, {}, {}]),
        "fetched 3 unseen emails from Support",
    ),
    (
        "choir.notion.query",
        {"action": "search", "query": "roadmap"},
        ok(),
        'searched Notion for "roadmap"',
    ),
    (
        "choir.propose.config_change",
        {"summary": "raise the daily cap", "patch": {}, "rationale": "r"},
        ok(),
        "proposed a config change: raise the daily cap",
    ),
    (
        "choir.propose.repo_change",
        {"branch": "proposal/greeting", "description": "a greeting skill"},
        ok(),
        "proposed a change to its repo on branch proposal/greeting",
    ),
    (
        "choir.propose.skill",
        {"spec": {"name": "triage"}, "rationale": "r"},
        ok(),
        "proposed skill triage",
    ),
    (
        "choir.propose.tool",
        {"manifest": {"llm": {"name": "acme.deploy"}}, "intended_behavior": "x", "rationale": "r"},
        ok(),
        "proposed tool acme.deploy",
    ),
    (
        "choir.tts.speak",
        {"text": "Good morning, the build is green."},
        ok(),
        'spoke "Good morning, the build is green." as audio',
    ),
]


def seed_tool_names() -> set[str]:
    return {json.loads(p.read_text())["llm"]["name"] for p in SEED_TOOLS.glob("*.json")}


def test_every_built_in_tool_has_its_own_sentence_and_a_case_here():
    assert seed_tool_names() == BUILTIN_TOOLS
    assert {tool for tool, *_ in CASES} == BUILTIN_TOOLS


@pytest.mark.parametrize(("tool", "arguments", "result", "expected"), CASES)
def test_a_built_in_tool_call_is_told_in_one_past_tense_sentence(
    tool: str, arguments: dict[str, Any], result: ToolResult, expected: str
):
    said = describe(tool, arguments, result)

    assert said == expected
    assert said == describe(tool, dict(arguments), result.model_copy())  # deterministic
    assert "\n" not in said
    assert len(said) <= MAX_CHARS
    assert not said.startswith("called ")  # not the generic sentence


def test_an_unknown_tool_gets_the_generic_sentence_without_secrets_or_data():
    result = ToolResult.ok("deployed v3", internal={"ip": "10.0.0.7"})
    said = describe(
        "acme.deploy", {"env": "prod", "api_key": "sk-live-123", "n": 3, "notes": "x" * 500}, result
    )

    assert said == "called acme.deploy with env=prod, n=3: deployed v3"
    assert describe("acme.deploy", {}, ToolResult.fail("denied", "no")) == (
        "tried to call acme.deploy but it failed (denied: no)"
    )


def test_secrets_in_a_command_never_reach_the_sentence():
    said = describe(
        "choir.exec",
        {
            "command": 'GITHUB_TOKEN=ghp_abc curl -H "Authorization: Bearer eyJhbG" '
            "--password hunter2 https://api.example.org"
        },
        ToolResult(status="success", summary="exit 0", data={"exit_code": 0}),
    )

    for secret in ("ghp_abc", "eyJhbG", "hunter2"):
        assert secret not in said
    assert said.startswith("ran `GITHUB_TOKEN=[REDACTED] curl")


def test_a_masked_tool_result_data_is_not_read():
    result = ok(results=[{"url": "u"}] * 4)

    assert describe("choir.web.search", {"query": "q"}, result) == (
        'searched the web for "q" (4 results)'
    )
    assert describe("choir.web.search", {"query": "q"}, result, masked=True) == (
        'searched the web for "q"'
    )


def test_long_values_are_cut_and_the_sentence_bounded():
    said = describe("choir.exec", {"command": "echo " + "x" * 5000}, None)

    assert len(said) <= MAX_CHARS
    assert said.startswith("asked to run `echo xxx")
    assert said.endswith("(no result)")
    assert len(describe("acme.x", {f"k{i}": "v" * 79 for i in range(20)}, ok("y" * 900))) <= 300


def test_a_call_without_arguments_in_the_log_falls_back_to_what_is_known():
    rejected = ToolResult.fail("not_allowed", "choir.exec is not allowed in this state")

    assert describe("choir.exec", None, rejected) == (
        "tried to call choir.exec but it failed (not_allowed: choir.exec is not allowed in this "
        "state)"
    )


def logged(events: list[tuple[str, Event]]) -> list[CommittedEvent]:
    sealed, previous = [], GENESIS_HASH
    for rev, (lane, event) in enumerate(events, start=1):
        committed = CommittedEvent.seal(
            rev=rev, lane=lane, ts=datetime.now(UTC), hash_prev=previous, event=event
        )
        sealed.append(committed)
        previous = committed.hash
    return sealed


def test_tool_rows_are_keyed_by_their_result_and_unanswered_calls_grouped():
    exec_ok = ToolResult(status="success", summary="exit 0", data={"exit_code": 0})
    events = logged(
        [
            ("edge", UserMsg(text="run the tests and write the todo")),
            (
                "edge",
                ModelOutput(
                    lane="edge",
                    model="m",
                    tool_calls=[
                        ToolCall(id="a", name="choir.exec", arguments={"command": "pytest -q"}),
                        ToolCall(
                            id="b",
                            name="choir.fs.write",
                            arguments={"path": "todo.md", "op": "append", "content": "x\n"},
                        ),
                    ],
                ),
            ),
            ("edge", ToolResultCommitted(call_id="a", tool="choir.exec", result=exec_ok)),
            (
                "core:audit",
                ModelOutput(
                    lane="core:audit",
                    model="m",
                    tool_calls=[
                        ToolCall(id="c", name="choir.fs.read", arguments={"path": "a.py"}),
                        ToolCall(id="d", name="choir.fs.read", arguments={"path": "b.py"}),
                    ],
                ),
            ),
            ("edge", ToolResultCommitted(call_id="b", tool="choir.fs.write", result=ok())),
            (
                "edge",
                ToolResultCommitted(
                    call_id="z", tool="choir.exec", result=ToolResult.fail("rejected", "no")
                ),
            ),
        ]
    )

    rows = tool_rows(list(reversed(events)))  # any order: sorted by revision

    assert [(r.index, r.first_rev, r.last_rev) for r in rows] == [
        (-3, 2, 3),
        (-4, 4, 4),
        (-5, 2, 5),
        (-6, 6, 6),
    ]
    assert {r.kind for r in rows} == {ChunkKind.TOOL_DESCRIPTION}
    assert [r.text for r in rows] == [
        "agent ran `pytest -q` (exit 0)",
        "agent (core job audit) asked to read a.py (no result); asked to read b.py (no result)",
        "agent appended 1 line to todo.md",
        "agent tried to call choir.exec but it failed (rejected: no)",
    ]
    assert [d.tool for d in tool_descriptions(events)] == [
        "choir.exec",
        "choir.fs.read",
        "choir.fs.write",
        "choir.exec",
    ]
    assert tool_rows(events) == rows  # the same events, the same rows


def test_memory_searches_get_no_row_so_a_later_search_finds_what_they_found():
    query = ToolCall(
        id="q", name="choir.memory.query", arguments={"store": "session", "query": "zebra"}
    )
    pending = ToolCall(id="p", name="choir.memory.query", arguments={"store": "knowledge"})
    events = logged(
        [
            ("edge", ModelOutput(lane="edge", model="m", tool_calls=[query, pending])),
            (
                "edge",
                ToolResultCommitted(call_id="q", tool="choir.memory.query", result=ok(hits=[{}])),
            ),
        ]
    )

    assert tool_rows(events) == []
    assert [d.text for d in tool_descriptions(events)] == [
        "asked to call choir.memory.query with store=knowledge (no result)",
        'searched session memory for "zebra" (1 hit)',
    ]  # browse still shows them
