"""`choir.memory.query store=working` over a real commit log, alone and through the arbiter."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from choir.agent.kernel.commitlog import CommitLog
from choir.agent.kernel.proposal import ToolProposal
from choir.agent.lanes.working_query import EXCERPT_CHARS, working_query_hook
from choir.agent.wiring import open_kernel
from choir.config import Budgets
from choir.core.budgets import BudgetLimits
from choir.core.prompt.window import MAX_TOOL_RESULT_CHARS, capped, event_messages, json_text
from choir.protocol import (
    ModelOutput,
    ToolCall,
    ToolCallRequested,
    ToolResult,
    ToolResultCommitted,
    UserMsg,
)

SEEDS = Path(__file__).parents[2] / "seeds" / "global"
AGENT = "helper"


def _query(**arguments: Any) -> dict[str, Any]:
    return {"store": "working", "mode": "keyword", **arguments}


def _proposal(arguments: dict[str, Any], lane: str = "edge", call_id: str = "q1") -> ToolProposal:
    return ToolProposal(lane=lane, call_id=call_id, tool="choir.memory.query", arguments=arguments)


def _session() -> CommitLog:
    log = CommitLog()
    log.commit("edge", UserMsg(text="Please deploy the Staging server tonight"))
    log.commit("edge", ModelOutput(lane="edge", text="Deploying to staging.", model="m"))
    log.commit("core:deploy", ModelOutput(lane="core:deploy", text="staging ready", model="m"))
    log.commit("edge", UserMsg(text="and the production server tomorrow " + "x" * 2_000))
    return log


async def _ask(log: CommitLog, arguments: dict[str, Any], lane: str = "edge") -> ToolResult:
    hook = working_query_hook(log, agent_id=AGENT)
    return await hook(_proposal(arguments, lane), arguments)


async def test_keywords_match_every_term_newest_first() -> None:
    log = _session()
    result = await _ask(log, _query(query="STAGING"))
    assert result.status == "success"
    matches = result.data["matches"]
    assert [m["rev"] for m in matches] == [3, 2, 1]
    assert matches[0] == {
        "rev": 3,
        "lane": "core:deploy",
        "kind": "model_output",
        "hash": log.entry(3).hash[:16],
        "ts": log.entry(3).ts,
        "excerpt": matches[0]["excerpt"],
    }
    assert "staging ready" in matches[0]["excerpt"]
    both = await _ask(log, _query(query="server staging"))
    assert [m["rev"] for m in both.data["matches"]] == [1]


async def test_excerpts_are_capped_around_the_match() -> None:
    log = _session()
    (match,) = (await _ask(log, _query(query="production"))).data["matches"]
    assert len(match["excerpt"]) <= EXCERPT_CHARS + 2
    assert "production" in match["excerpt"]
    assert match["excerpt"].endswith("…")


async def test_limit_caps_matches_and_says_so() -> None:
    log = CommitLog()
    for i in range(60):
        log.commit("edge", UserMsg(text=f"note {i}"))
    capped = await _ask(log, _query(query="note", limit=5))
    assert [m["rev"] for m in capped.data["matches"]] == [60, 59, 58, 57, 56]
    assert capped.truncated
    assert "more exist" in capped.summary
    default = await _ask(log, _query(query="note 1"))
    assert len(default.data["matches"]) == 10
    exact = await _ask(log, _query(query="note 59"))
    assert not exact.truncated


async def test_hash_mode_finds_an_event_by_its_prefix() -> None:
    log = _session()
    wanted = log.entry(2).hash
    result = await _ask(log, _query(mode="hash", query=wanted[:10].upper()))
    assert [m["rev"] for m in result.data["matches"]] == [2]
    assert result.data["mode"] == "hash"
    nothing = await _ask(log, _query(mode="hash", query="0000000000000000"))
    assert nothing.status == "success"
    assert nothing.data["matches"] == []


@pytest.mark.parametrize(
    ("arguments", "code", "fragment"),
    [
        (_query(mode="hash", query="not-a-hash"), "invalid_input", "not an event hash"),
        (_query(mode="semantic", query="x"), "invalid_input", "use keyword, hash or result"),
        (_query(query="x", session_id="s1"), "invalid_input", "session_id"),
        (_query(query="   "), "invalid_input", "query is empty"),
        (_query(query="x", target_agent="other"), "access_denied", "this session's only"),
    ],
)
async def test_refusals(arguments: dict[str, Any], code: str, fragment: str) -> None:
    result = await _ask(_session(), arguments)
    assert result.status == "error"
    assert result.error_code == code
    assert fragment in result.summary


async def test_own_agent_as_target_is_fine() -> None:
    result = await _ask(_session(), _query(query="staging", target_agent=AGENT))
    assert result.status == "success"


async def test_a_core_job_never_sees_user_messages() -> None:
    result = await _ask(_session(), _query(query="server"), lane="core:deploy")
    assert result.data["matches"] == []
    own = await _ask(_session(), _query(query="staging"), lane="core:deploy")
    assert [m["rev"] for m in own.data["matches"]] == [3, 2]


async def test_echoes_of_the_query_itself_are_left_out() -> None:
    log = _session()
    arguments = _query(query="staging")
    call = ToolCall(id="q1", name="choir.memory.query", arguments=arguments)
    log.commit("edge", ModelOutput(lane="edge", tool_calls=[call], model="m"))
    log.commit(
        "edge", ToolCallRequested(call_id="q1", tool="choir.memory.query", arguments=arguments)
    )
    earlier = ToolResult.ok("1 event", matches=[{"excerpt": "staging"}])
    log.commit("edge", ToolResultCommitted(call_id="q0", tool="choir.memory.query", result=earlier))
    result = await _ask(log, arguments)
    assert [m["rev"] for m in result.data["matches"]] == [3, 2, 1]


async def test_other_stores_go_to_the_fallback() -> None:
    seen: list[tuple[str, dict[str, Any]]] = []

    async def host(proposal: ToolProposal, arguments: dict[str, Any]) -> ToolResult:
        seen.append((proposal.call_id, arguments))
        return ToolResult.ok("from choird")

    hook = working_query_hook(_session(), agent_id=AGENT, fallback=host)
    arguments = {"store": "knowledge", "mode": "text", "query": "staging"}
    result = await hook(_proposal(arguments), arguments)
    assert result.summary == "from choird"
    assert seen == [("q1", arguments)]
    alone = working_query_hook(_session(), agent_id=AGENT)
    refused = await alone(_proposal(arguments), arguments)
    assert refused.error_code == "host_unavailable"


async def test_the_hook_answers_through_the_arbiter(tmp_path: Path) -> None:
    root = tmp_path / "choir"
    (root / "tools" / "global").mkdir(parents=True)
    shutil.copy(SEEDS / "tools" / "choir.memory.query.json", root / "tools" / "global")
    (root / "skills").mkdir()
    workspace = tmp_path / "ws"
    workspace.mkdir()
    log = _session()
    hooks = {"choir.memory.query": working_query_hook(log, agent_id=AGENT)}
    limits = BudgetLimits(**Budgets().model_dump())
    async with open_kernel(
        root,
        workspace,
        limits=limits,
        lane_hooks=hooks,
        log=log,
    ) as kernel:
        result = await kernel.arbiter.propose(_proposal(_query(query="production")))
        bad = await kernel.arbiter.propose(
            _proposal({"store": "working", "mode": "keyword"}, call_id="q2")
        )
    assert [m["rev"] for m in result.data["matches"]] == [4]
    results = [entry.event for entry in log if entry.kind == "tool_result_committed"]
    assert results[0]["call_id"] == "q1"
    assert results[0]["result"] == result.model_dump(mode="json")
    assert bad.error_code == "invalid_input"  # the manifest's schema: query is required


def _huge_result_session(chars: int) -> tuple[CommitLog, str]:
    """A session whose one tool result is `chars` characters of numbered lines."""
    log = CommitLog()
    text = "".join(f"line {n:06d}\n" for n in range(chars // 12 + 1))[:chars]
    result = ToolResult.ok("read a big file", text=text)
    log.commit("edge", BIG_RESULT.model_copy(update={"result": result}))
    return log, json_text(result.model_dump(mode="json", exclude_none=True))


BIG_RESULT = ToolResultCommitted(
    call_id="big-1", tool="choir.fs.read", result=ToolResult.ok("placeholder")
)


async def test_a_truncated_result_is_read_whole_page_by_page_from_where_the_prompt_cut() -> None:
    """The prompt's truncation note names a call that reads on (issue 18: a large result is a
    reference, never lost): pages join up to exactly the result the prompt cut."""
    log, whole = _huge_result_session(60_000)
    event = ToolResultCommitted.model_validate(log.entry(1).event)
    [message] = event_messages(event)
    note = message["content"][MAX_TOOL_RESULT_CHARS:]
    assert f"mode=result query=big-1 offset={MAX_TOOL_RESULT_CHARS} reads on" in note

    pages, offset = [message["content"][:MAX_TOOL_RESULT_CHARS]], MAX_TOOL_RESULT_CHARS
    while offset is not None:
        arguments = {"store": "working", "mode": "result", "query": "big-1", "offset": offset}
        page = await _ask(log, arguments)
        assert page.status == "success", page.summary
        assert len(capped(json_text(page.model_dump(mode="json")), "q")) <= MAX_TOOL_RESULT_CHARS
        pages.append(page.data["text"])
        offset = page.data.get("next_offset")
        assert page.truncated is (offset is not None)
    assert "".join(pages) == whole


async def test_reading_a_result_refuses_unknown_calls_bad_offsets_and_offsets_elsewhere() -> None:
    log, whole = _huge_result_session(1_000)
    missing = await _ask(log, {"store": "working", "mode": "result", "query": "nope"})
    assert (missing.status, missing.error_code) == ("error", "not_found")
    past = await _ask(
        log, {"store": "working", "mode": "result", "query": "big-1", "offset": len(whole) + 1}
    )
    assert past.error_code == "invalid_input"
    assert "outside" in past.summary
    misplaced = await _ask(log, _query(query="line", offset=10))
    assert misplaced.error_code == "invalid_input"
    assert "mode result" in misplaced.summary


async def test_a_masked_result_reads_as_masked() -> None:
    """Reading on never shows more than the prompt would (`prompt_mask`, §8.5)."""
    log, _ = _huge_result_session(30_000)

    def masked(tool: str, result: ToolResult) -> dict[str, Any]:
        return {"status": result.status, "summary": result.summary}

    hook = working_query_hook(log, agent_id=AGENT, result_view=masked)
    arguments = {"store": "working", "mode": "result", "query": "big-1"}
    page = await hook(_proposal(arguments), arguments)
    assert page.data["text"] == '{"status":"success","summary":"read a big file"}'
