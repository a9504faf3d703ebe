"""Per-lane prompts: the seed-000 layout, event -> message tables, and call/result pairing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from choir.agent.kernel.commitlog import CommitLog
from choir.agent.kernel.registry import ToolRegistry
from choir.agent.tools.builtin import BUILTIN_TOOLS
from choir.core.memory.working import WorkingMemory
from choir.core.prompt.build import core_prompt, edge_prompt
from choir.core.prompt.text import CORE_INSTRUCTIONS, EDGE_INSTRUCTIONS, system_text
from choir.core.prompt.window import (
    CHARS_PER_TOKEN,
    ShownEvents,
    estimate_tokens,
    event_messages,
    full_result,
    window_messages,
)
from choir.core.skills.runner import SkillView
from choir.protocol import (
    AgentReplied,
    ApprovalResolved,
    Cancelled,
    CoreEventEmitted,
    CoreJobStart,
    CoreStarted,
    CoreStopped,
    Event,
    InjectedInstruction,
    MemoryDelta,
    MemoryWriteCommitted,
    ModelOutput,
    ReferenceSummary,
    SessionSummary,
    SkillTransitionCommitted,
    ToolCall,
    ToolCallCommitted,
    ToolCallRequested,
    ToolResult,
    ToolResultCommitted,
    UserMsg,
)
from choir.protocol.log.core_jobs import (
    ContextBundle,
    CoreError,
    CoreFinalResult,
    CoreNeedInfo,
    CoreProgress,
    ToolConstraints,
)

SKILLS = [("tool-builder", "Build a new tool."), ("skill-builder", "Design a new skill.")]
BRIEFING = CoreJobStart(
    job_id="job-1",
    job_name="refactor-auth",
    task_spec="Move token checks into auth/tokens.py.",
    context_bundle=ContextBundle(facts=["tests live in tests/auth"], constraints=["keep the API"]),
    tool_constraints=ToolConstraints(allowed_tools=["choir.fs.read"], time_budget_ms=60_000),
)
VIEW = SkillView(
    skill="tool-builder",
    state="plan",
    objective="Plan the tool.",
    allowed_tools=("choir.fs.read", "choir.skill.transition"),
    transitions=(("complete", "build"),),
    steps_left=5,
    retries_left=2,
)


def _output(
    *calls: tuple[str, str, dict[str, Any]], text: str = "", lane: str = "edge"
) -> ModelOutput:
    tool_calls = [ToolCall(id=i, name=n, arguments=a) for i, n, a in calls]
    return ModelOutput(lane=lane, text=text, tool_calls=tool_calls, model="m")


def _result(call_id: str, tool: str = "choir.fs.read", summary: str = "ok") -> ToolResultCommitted:
    return ToolResultCommitted(call_id=call_id, tool=tool, result=ToolResult.ok(summary, n=1))


def _memory(
    lane: str,
    *events: tuple[str, Event],
    start: int = 1,
    summary: ReferenceSummary | None = None,
) -> WorkingMemory:
    log = CommitLog()
    for committer, event in events:
        log.commit(committer, event)
    memory = WorkingMemory(lane, summary=summary or ReferenceSummary(), window_start_rev=start)
    return memory.observe_all(log)


EVENT_TABLE: list[tuple[Event, list[dict[str, Any]]]] = [
    (UserMsg(text="hi"), [{"role": "user", "content": "hi"}]),
    (
        UserMsg(text="see file", attachments=[".choirtmp/recv/a.png"]),
        [{"role": "user", "content": "see file\n[attached: .choirtmp/recv/a.png]"}],
    ),
    (_output(text="Hello!"), [{"role": "assistant", "content": "Hello!"}]),
    (
        _output(("c1", "choir.fs.read", {"path": "a.txt"}), text="Reading."),
        [
            {
                "role": "assistant",
                "content": "Reading.",
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "choir__fs__read", "arguments": '{"path":"a.txt"}'},
                    }
                ],
            }
        ],
    ),
    (
        _result("c1"),
        [
            {
                "role": "tool",
                "tool_call_id": "c1",
                "content": '{"status":"success","summary":"ok","data":{"n":1},"truncated":false}',
            }
        ],
    ),
    (
        InjectedInstruction(target="edge", content="use metric units", source="user"),
        [{"role": "system", "content": "[INJECTED] use metric units"}],
    ),
    (
        CoreStopped(job_name="refactor-auth", job_id="j", outcome="completed", report="Done."),
        [{"role": "system", "content": "[CORE COMPLETED] core job refactor-auth: Done."}],
    ),
    (
        CoreEventEmitted(job_name="w", event=CoreFinalResult(summary="3 tests added")),
        [{"role": "system", "content": "[CORE EVENT] core job w final result: 3 tests added"}],
    ),
    (
        CoreEventEmitted(job_name="w", event=CoreError(code="llm_error", message="503")),
        [{"role": "system", "content": "[CORE EVENT] core job w error (llm_error): 503"}],
    ),
    (
        CoreEventEmitted(job_name="w", event=CoreNeedInfo(question="Which branch?")),
        [{"role": "system", "content": "[CORE EVENT] core job w needs information: Which branch?"}],
    ),
    (
        AgentReplied(text="Job done.", category="core_report"),
        [{"role": "assistant", "content": "Job done."}],
    ),
    (ToolCallRequested(call_id="c1", tool="choir.fs.read"), []),
    (
        ToolCallCommitted(call_id="c1", tool="choir.fs.read", side_effect="read", idempotent=True),
        [],
    ),
    (
        MemoryWriteCommitted(
            summary_lane="edge", delta=MemoryDelta(mode="append"), window_start_rev=2
        ),
        [],
    ),
    (CoreStarted(job=BRIEFING), []),
    (Cancelled(target="edge", reason="operator"), []),
    (SkillTransitionCommitted(skill="tool-builder", from_=None, to="plan", on="start"), []),
    (
        ApprovalResolved(approval_id="a1", status="failed", reason="build: it broke"),
        [{"role": "system", "content": "[APPROVAL] a1 failed: build: it broke"}],
    ),
    (SessionSummary(summary="s"), []),
    (_output(), []),
]


@pytest.mark.parametrize(("event", "expected"), EVENT_TABLE, ids=lambda v: getattr(v, "kind", ""))
def test_each_event_kind_becomes_its_messages(event: Event, expected: list[dict[str, Any]]) -> None:
    assert event_messages(event) == expected


def test_edge_layout_follows_the_memory_page() -> None:
    summary = ReferenceSummary(summary="The user is planning a trip.")
    memory = _memory(
        "edge",
        ("edge", UserMsg(text="book it")),
        ("edge", _output(("c1", "choir.fs.read", {"path": "plan.md"}))),
        ("edge", _result("c1")),
        summary=summary,
    )
    messages = edge_messages_of(memory, user_md="Name: Ada", soul_md="Warm, brief.", skills=SKILLS)
    assert [m["role"] for m in messages] == ["system"] * 4 + ["user", "assistant", "tool"]
    assert messages[0]["content"] == system_text(EDGE_INSTRUCTIONS, SKILLS)
    assert "- tool-builder: Build a new tool." in messages[0]["content"]
    assert "parameters" not in messages[0]["content"]  # tool schemas travel in `tools`
    assert messages[1]["content"] == "[USER.md: the user]\nName: Ada"
    assert messages[2]["content"] == "[SOUL.md: who you are]\nWarm, brief."
    assert messages[3]["content"].startswith("[Reference summary")
    assert "The user is planning a trip." in messages[3]["content"]
    assert messages[4] == {"role": "user", "content": "book it"}


def test_core_layout_has_soul_core_only_and_ends_with_the_briefing() -> None:
    lane = "core:refactor-auth"
    memory = _memory(
        lane,
        ("edge", UserMsg(text="raw user chatter")),
        (lane, _output(("c1", "choir.fs.read", {"path": "auth.py"}), lane=lane)),
        (lane, _result("c1")),
        ("edge", InjectedInstruction(target=lane, content="also update docs", source="edge")),
    )
    messages = core_messages_of(memory, soul_core_md="Precise.", briefing=BRIEFING, skills=SKILLS)
    contents = [str(m["content"]) for m in messages]
    assert messages[0]["content"] == system_text(CORE_INSTRUCTIONS, SKILLS)
    assert contents[1] == "[SOUL-CORE.md: who you are]\nPrecise."
    assert not any("USER.md" in c or "SOUL.md:" in c for c in contents)
    assert not any("raw user chatter" in c for c in contents)
    assert [m["role"] for m in messages[2:]] == ["assistant", "tool", "system", "system"]
    assert contents[-2] == "[INJECTED] also update docs"
    briefing = contents[-1]
    assert briefing.startswith("[CoreJobStart: job refactor-auth, id job-1]")
    assert "Task: Move token checks into auth/tokens.py." in briefing
    assert "- keep the API" in briefing
    assert "Allowed tools: choir.fs.read" in briefing
    assert "Time budget: 60 s" in briefing


def test_empty_identity_and_summary_are_left_out() -> None:
    memory = _memory("edge", ("edge", UserMsg(text="hi")))
    messages = edge_messages_of(memory, user_md="  \n", soul_md="Kind.")
    assert [m["content"] for m in messages[1:]] == ["[SOUL.md: who you are]\nKind.", "hi"]
    assert messages[0]["content"] == EDGE_INSTRUCTIONS  # no skills, no skill section


@pytest.mark.parametrize("lane", ["edge", "core:refactor-auth"])
def test_skill_view_shows_only_while_a_skill_runs(lane: str) -> None:
    memory = WorkingMemory(lane)

    def build(view: SkillView | None) -> list[dict[str, Any]]:
        if lane == "edge":
            return edge_messages_of(memory, user_md="u", soul_md="s", skill_view=view)
        return core_messages_of(memory, soul_core_md="c", briefing=BRIEFING, skill_view=view)

    with_skill, without = build(VIEW), build(None)
    assert with_skill[:-1] == without
    assert with_skill[-1] == {"role": "system", "content": VIEW.render()}
    assert "Objective: Plan the tool." in with_skill[-1]["content"]
    assert "complete -> build" in with_skill[-1]["content"]


def test_identity_and_latest_user_message_survive_compaction() -> None:
    memory = _memory(
        "edge",
        ("edge", UserMsg(text="first question")),
        ("edge", _output(text="first answer")),
        ("edge", UserMsg(text="the current question")),
        ("edge", _output(("c1", "choir.fs.read", {"path": "x"}))),
        ("edge", _result("c1")),
    )
    folded = memory.folded(ReferenceSummary(summary="Talked about x."), upto_rev=5)
    messages = edge_messages_of(folded, user_md="Ada", soul_md="Kind.")
    contents = [m["content"] for m in messages]
    assert contents[1:3] == ["[USER.md: the user]\nAda", "[SOUL.md: who you are]\nKind."]
    assert "Talked about x." in contents[3]
    assert messages[4:] == [{"role": "user", "content": "the current question"}]
    assert "first question" not in json.dumps(messages)


def test_a_head_is_built_again_only_when_what_it_shows_changed() -> None:
    memory = _memory("edge", ("edge", UserMsg(text="hi")))
    first = edge_prompt(memory, user_md="Ada", soul_md="Kind.", skills=[("a", "does a")])
    again = edge_prompt(memory, user_md="Ada", soul_md="Kind.", skills=[("a", "does a")])
    assert all(x is y for x, y in zip(first.messages[:3], again.messages[:3], strict=True))
    assert first.fixed_tokens == again.fixed_tokens
    user = edge_prompt(memory, user_md="Grace", soul_md="Kind.", skills=[("a", "does a")])
    assert user.messages[1]["content"] == "[USER.md: the user]\nGrace"
    skills = edge_prompt(memory, user_md="Ada", soul_md="Kind.", skills=[("b", "does b")])
    assert "- b: does b" in skills.messages[0]["content"]
    folded = memory.folded(ReferenceSummary(summary="Talked about x."), upto_rev=0)
    summed = edge_prompt(folded, user_md="Ada", soul_md="Kind.", skills=[("a", "does a")])
    assert "Talked about x." in summed.messages[3]["content"]
    assert summed.fixed_tokens > first.fixed_tokens
    refolded = folded.folded(ReferenceSummary(summary="Talked about y."), upto_rev=0)
    resummed = edge_prompt(refolded, user_md="Ada", soul_md="Kind.", skills=[("a", "does a")])
    assert "Talked about y." in resummed.messages[3]["content"]


def test_latest_user_message_keeps_its_place_in_the_window() -> None:
    memory = _memory(
        "edge",
        ("edge", UserMsg(text="q1")),
        ("edge", _output(text="a1")),
        ("edge", UserMsg(text="q2")),
        ("edge", _output(("c1", "choir.fs.read", {"path": "x"}))),
        ("edge", _result("c1")),
    )
    window = edge_messages_of(memory, user_md="", soul_md="", window_size=2)[1:]
    assert [m["role"] for m in window] == ["user", "assistant", "tool"]
    assert window[0]["content"] == "q2"


def test_window_size_caps_the_events_shown() -> None:
    events = [("edge", _output(text=f"note {i}")) for i in range(8)]
    memory = _memory("edge", *events)
    window = edge_messages_of(memory, user_md="", soul_md="", window_size=3)[1:]
    assert [m["content"] for m in window] == ["note 5", "note 6", "note 7"]


def test_notes_wait_until_open_calls_are_answered() -> None:
    memory = _memory(
        "edge",
        ("edge", _output(("a", "choir.fs.read", {}), ("b", "choir.fs.read", {}))),
        ("edge", _result("a")),
        ("core:w", CoreStopped(job_name="w", job_id="j", outcome="completed", report="ok")),
        ("edge", InjectedInstruction(target="edge", content="hurry", source="user")),
        ("edge", _result("b")),
    )
    roles = [m["role"] for m in window_messages(memory.window(50))]
    assert roles == ["assistant", "tool", "tool", "system", "system"]


def test_reply_repeating_the_model_text_is_shown_once() -> None:
    memory = _memory(
        "edge",
        ("edge", _output(text="All set.")),
        ("edge", AgentReplied(text="All set.")),
        ("edge", AgentReplied(text="(report) job w finished", category="core_report")),
    )
    assert [m["content"] for m in window_messages(memory.window(50))] == [
        "All set.",
        "(report) job w finished",
    ]


def test_orphans_at_the_window_start_and_unanswered_calls_are_dropped() -> None:
    memory = _memory(
        "edge",
        ("edge", _output(("old", "choir.fs.read", {}))),
        ("edge", _result("old")),
        ("edge", _output(("c1", "choir.fs.read", {}), ("c2", "choir.fs.read", {}), text="Both.")),
        ("edge", _result("c1")),
        ("edge", _output(("c3", "choir.fs.read", {}))),
        start=2,
    )
    messages = window_messages(memory.window(50))
    assert messages[0]["tool_calls"][0]["id"] == "c1"
    assert len(messages[0]["tool_calls"]) == 1
    assert [m["role"] for m in messages] == ["assistant", "tool"]


def test_core_progress_stays_out_of_the_edge_window() -> None:
    memory = _memory(
        "edge", ("core:w", CoreEventEmitted(job_name="w", event=CoreProgress(phase="read")))
    )
    assert memory.events == ()


def test_prompt_mask_shows_only_status_summary_and_artifact(tmp_path: Path) -> None:
    registry = _registry_with_masked_tool(tmp_path)
    result = ToolResult(
        status="success", summary="fetched", data={"token": "s3cret"}, artifact_ref="out/a.json"
    )
    memory = _memory(
        "edge",
        ("edge", _output(("c1", "test.fetch", {}))),
        ("edge", ToolResultCommitted(call_id="c1", tool="test.fetch", result=result)),
    )
    messages = edge_messages_of(
        memory, user_md="", soul_md="", result_view=registry.result_for_prompt
    )
    assert json.loads(messages[-1]["content"]) == {
        "status": "success",
        "summary": "fetched",
        "artifact_ref": "out/a.json",
    }
    assert "s3cret" not in json.dumps(messages)


def test_prompt_measures_window_and_fixed_parts() -> None:
    memory = _memory(
        "edge",
        ("edge", _output(text="x" * 400)),
        ("edge", UserMsg(text="y" * 4000)),
    )
    prompt = edge_prompt(memory, user_md="", soul_md="")
    assert 100 <= prompt.window_tokens < 200  # the latest user message is not compactable
    assert prompt.fixed_tokens > 1000
    tools = [{"type": "function", "function": {"name": "t", "description": "d" * 400}}]
    size = prompt.size(tools)
    assert size.window_tokens == prompt.window_tokens
    assert size.fixed_tokens > prompt.fixed_tokens + 100
    core = core_prompt(WorkingMemory("core:w"), soul_core_md="", briefing=BRIEFING)
    assert core.window_tokens == 0


def test_the_tools_measured_again_count_the_same_and_new_ones_are_measured() -> None:
    """The tools' size is remembered by the identity of the tool dicts (the registry's shared
    views): the same dicts count what they counted, other dicts are encoded afresh."""
    prompt = edge_prompt(WorkingMemory("edge"), user_md="", soul_md="")
    short = [{"type": "function", "function": {"name": "t", "description": "d" * 40}}]
    counted = prompt.size(short).fixed_tokens - prompt.fixed_tokens
    assert counted == estimate_tokens(short)
    assert prompt.size(list(short)).fixed_tokens - prompt.fixed_tokens == counted
    longer = [{"type": "function", "function": {"name": "t", "description": "d" * 4000}}]
    assert prompt.size(longer).fixed_tokens - prompt.fixed_tokens == estimate_tokens(longer)
    both = [*short, *longer]
    assert prompt.size(both).fixed_tokens - prompt.fixed_tokens == estimate_tokens(both)


# -- the pairing invariant ------------------------------------------------------------------

IDS = st.sampled_from(["a", "b", "c", "d"])
EVENTS = st.one_of(
    st.builds(lambda: UserMsg(text="u")),
    st.builds(
        lambda ids, text: _output(*((i, "choir.fs.read", {}) for i in ids), text=text),
        st.lists(IDS, max_size=3),
        st.sampled_from(["", "thinking"]),
    ),
    st.builds(_result, IDS),
    st.builds(lambda: InjectedInstruction(target="edge", content="i", source="user")),
    st.builds(lambda: CoreStopped(job_name="w", job_id="j", outcome="completed", report="r")),
    st.builds(lambda: AgentReplied(text="r")),
)


@settings(max_examples=400)
@given(
    events=st.lists(EVENTS, max_size=30),
    start=st.integers(min_value=1, max_value=31),
    size=st.integers(min_value=0, max_value=30),
)
def test_every_tool_call_is_answered_right_after_it(
    events: list[Event], start: int, size: int
) -> None:
    memory = _memory("edge", *(("edge", e) for e in events), start=start)
    messages = edge_messages_of(memory, user_md="", soul_md="", window_size=size)
    _assert_paired(messages)


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)


@given(st.lists(st.dictionaries(st.text(), JSON, max_size=4), max_size=6))
def test_estimate_tokens_counts_each_messages_own_encoding(messages: list[dict[str, Any]]) -> None:
    chars = sum(len(orjson.dumps(message)) for message in messages)
    assert estimate_tokens(messages) == -(-chars // CHARS_PER_TOKEN)
    assert estimate_tokens(iter(messages)) == estimate_tokens(messages)


def _masked_view(tool: str, result: ToolResult) -> dict[str, Any]:
    return {"status": result.status}


@settings(max_examples=200)
@given(
    events=st.lists(EVENTS, max_size=40),
    size=st.integers(min_value=0, max_value=12),
    switch=st.integers(min_value=0, max_value=40),
)
def test_a_lanes_kept_messages_give_the_prompt_built_afresh(
    events: list[Event], size: int, switch: int
) -> None:
    """Step by step, as a lane calls the model while its log grows (the window sliding past
    events, a reloaded registry masking results from step `switch`): the prompt built with the
    lane's kept `ShownEvents` is the one built from nothing, messages and sizes alike."""
    shown = ShownEvents()
    log = CommitLog()
    for step, event in enumerate(events):
        log.commit("edge", event)
        memory = WorkingMemory("edge").observe_all(log)
        view = _masked_view if step >= switch else full_result
        kept = edge_prompt(
            memory, user_md="", soul_md="s", window_size=size, result_view=view, shown=shown
        )
        fresh = edge_prompt(memory, user_md="", soul_md="s", window_size=size, result_view=view)
        assert kept == fresh
        assert kept.size() == fresh.size()


@settings(max_examples=300)
@given(
    events=st.lists(EVENTS, max_size=60),
    size=st.integers(min_value=0, max_value=12),
    folds=st.sets(st.integers(min_value=0, max_value=60), max_size=4),
    switch=st.integers(min_value=0, max_value=60),
)
def test_a_prompt_taking_over_the_last_transcript_is_the_one_built_afresh(
    events: list[Event], size: int, folds: set[int], switch: int
) -> None:
    """As a lane really grows its memory — one observed commit at a time, so successive windows
    share their events (the same objects), slide, and lose their oldest events to folds at
    steps `folds` — the prompt built from the kept transcript is the one built from nothing."""
    shown = ShownEvents()
    log = CommitLog()
    memory = WorkingMemory("edge")
    for step, event in enumerate(events):
        memory = memory.observe(log.commit("edge", event), event)
        if step in folds and memory.events:
            memory = memory.folded(memory.summary, memory.events[len(memory.events) // 2].rev)
        view = _masked_view if step >= switch else full_result
        kept = edge_prompt(
            memory, user_md="", soul_md="s", window_size=size, result_view=view, shown=shown
        )
        fresh = edge_prompt(memory, user_md="", soul_md="s", window_size=size, result_view=view)
        assert kept == fresh
        assert kept.size() == fresh.size()
        _assert_paired(list(kept.messages))


def _assert_paired(messages: list[dict[str, Any]]) -> None:
    index = 0
    while index < len(messages):
        message = messages[index]
        assert message["role"] != "tool", f"tool message without its call at {index}"
        calls = [call["id"] for call in message.get("tool_calls", [])]
        assert len(calls) == len(set(calls))
        answers = [m.get("tool_call_id") for m in messages[index + 1 : index + 1 + len(calls)]]
        assert answers == calls
        if calls:
            assert message["content"] is None or message["content"]
        index += 1 + len(calls)


def _registry_with_masked_tool(tmp_path: Path) -> ToolRegistry:
    tools = tmp_path / "tools" / "global"
    tools.mkdir(parents=True)
    manifest = {
        "llm": {
            "name": "test.fetch",
            "description": "Fetch a secret document (test tool).",
            "parameters": {"type": "object", "properties": {}, "additionalProperties": False},
        },
        "runtime": {
            "implementation": "host",
            "timeout_ms": 1000,
            "side_effect": "read",
            "idempotent": True,
            "prompt_mask": True,
        },
    }
    (tools / "test.fetch.json").write_text(json.dumps(manifest))
    return ToolRegistry.load(tmp_path, BUILTIN_TOOLS)


def test_an_oversize_tool_result_is_cut_before_it_reaches_the_prompt() -> None:
    from choir.core.prompt.window import MAX_TOOL_RESULT_CHARS, event_messages
    from choir.protocol import ToolResult, ToolResultCommitted

    huge = ToolResult.ok("read", text="x" * (MAX_TOOL_RESULT_CHARS * 3))
    [message] = event_messages(
        ToolResultCommitted(call_id="c-1", tool="choir.fs.read", result=huge)
    )
    assert len(message["content"]) < MAX_TOOL_RESULT_CHARS + 200
    assert "[truncated:" in message["content"]
    assert "query=c-1" in message["content"]


def edge_messages_of(*args: Any, **kwargs: Any) -> list[dict[str, Any]]:
    return list(edge_prompt(*args, **kwargs).messages)


def core_messages_of(*args: Any, **kwargs: Any) -> list[dict[str, Any]]:
    return list(core_prompt(*args, **kwargs).messages)
