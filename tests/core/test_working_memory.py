"""Working memory: which events each lane keeps, compaction triggers, and the atomic fold."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from choir.agent.kernel.commitlog import CommitLog, LogEntry
from choir.core.memory.compaction import (
    CompactionApplied,
    CompactionFailed,
    CompactionPolicy,
    apply_compaction,
    compaction_request,
    should_compact,
)
from choir.core.memory.fold_prompt import parse_delta
from choir.core.memory.working import WorkingMemory, in_window
from choir.core.prompt.build import PromptSize, edge_prompt
from choir.protocol import (
    AgentReplied,
    CoreEventEmitted,
    CoreStopped,
    Event,
    Fact,
    InjectedInstruction,
    MemoryDelta,
    ModelOutput,
    ReferenceSummary,
    ToolCall,
    ToolCallRequested,
    ToolResult,
    ToolResultCommitted,
    UserMsg,
)
from choir.protocol.log.core_jobs import CoreFinalResult, CoreProgress

CORE = "core:refactor-auth"
SMALL = PromptSize(window_tokens=10, fixed_tokens=100)
POLICY = CompactionPolicy(context_window_tokens=10_000, event_window_size=10)


def _output(*ids: str, text: str = "", lane: str = "edge") -> ModelOutput:
    calls = [ToolCall(id=i, name="choir.fs.read", arguments={"path": f"{i}.txt"}) for i in ids]
    return ModelOutput(lane=lane, text=text, tool_calls=calls, model="m")


def _result(call_id: str) -> ToolResultCommitted:
    result = ToolResult.ok(f"read {call_id}.txt", text="x" * 40)
    return ToolResultCommitted(call_id=call_id, tool="choir.fs.read", result=result)


def _log(*events: tuple[str, Event]) -> CommitLog:
    log = CommitLog()
    for lane, event in events:
        log.commit(lane, event)
    return log


def _chat(turns: int) -> CommitLog:
    """`turns` edge turns: a question, a tool call and its result, an answer."""
    events: list[tuple[str, Event]] = []
    for turn in range(turns):
        events += [
            ("edge", UserMsg(text=f"question {turn}")),
            ("edge", _output(f"c{turn}")),
            ("edge", _result(f"c{turn}")),
            ("edge", _output(text=f"answer {turn}")),
        ]
    return _log(*events)


def _record(lane: str, event: Event) -> LogEntry:
    return _log((lane, event)).entry(1)


STOPPED = CoreStopped(job_name="refactor-auth", job_id="j", outcome="completed", report="r")
FINAL = CoreEventEmitted(job_name="refactor-auth", event=CoreFinalResult(summary="s"))
PROGRESS = CoreEventEmitted(job_name="refactor-auth", event=CoreProgress(phase="p"))

MEMBERSHIP: list[tuple[str, str, Event, bool]] = [
    ("edge", "edge", UserMsg(text="hi"), True),
    ("edge", "edge", _output(text="hello"), True),
    ("edge", "edge", _result("c1"), True),
    ("edge", "edge", AgentReplied(text="hello"), True),
    ("edge", "edge", ToolCallRequested(call_id="c1", tool="choir.fs.read"), False),
    ("edge", "edge", InjectedInstruction(target="edge", content="x", source="user"), True),
    ("edge", "edge", InjectedInstruction(target=CORE, content="x", source="edge"), False),
    ("edge", CORE, _output(text="core thinking", lane=CORE), False),
    ("edge", CORE, _result("k1"), False),
    ("edge", CORE, STOPPED, True),
    ("edge", CORE, FINAL, True),
    ("edge", CORE, PROGRESS, False),
    (CORE, CORE, _output(text="core thinking", lane=CORE), True),
    (CORE, CORE, _result("k1"), True),
    (CORE, "edge", UserMsg(text="raw"), False),
    (CORE, "edge", _output(text="edge reply"), False),
    (CORE, "edge", InjectedInstruction(target=CORE, content="x", source="edge"), True),
    (CORE, "core:other", _output(text="other job", lane="core:other"), False),
    (CORE, CORE, STOPPED, False),
    (CORE, CORE, FINAL, False),
]


@pytest.mark.parametrize(("lane", "committer", "event", "expected"), MEMBERSHIP)
def test_which_events_belong_to_which_window(
    lane: str, committer: str, event: Event, expected: bool
) -> None:
    assert in_window(lane, _record(committer, event)) is expected


def test_edge_pins_the_latest_user_message_even_before_the_window() -> None:
    log = _chat(3)
    memory = WorkingMemory("edge", window_start_rev=10).observe_all(log)
    assert memory.latest_user is not None
    assert memory.latest_user.rev == 9
    assert [item.rev for item in memory.events] == [10, 11, 12]
    assert [item.rev for item in memory.window(2)] == [9, 11, 12]
    assert [item.rev for item in memory.compactable()] == [10, 11, 12]


@settings(max_examples=60, deadline=None)
@given(
    st.integers(1, 6),
    st.integers(1, 30),
    st.lists(st.integers(0, 40), max_size=3),
    st.integers(0, 9),
)
def test_window_and_compactable_are_the_events_by_rev_without_the_pinned_message(
    turns: int, start: int, folds: list[int], size: int
) -> None:
    """Found by rev, as they are now, they are what a scan and a sort by rev gave."""
    memory = WorkingMemory("edge", window_start_rev=start).observe_all(_chat(turns))
    for upto in [0, *sorted(folds)]:
        if upto >= memory.window_start_rev:
            memory = memory.folded(memory.summary, upto)
        user = memory.latest_user
        compactable = tuple(item for item in memory.events if item is not user)
        assert memory.compactable() == compactable
        shown = compactable[-size:] if size > 0 else ()
        pinned = (*shown, user) if user is not None else shown
        assert memory.window(size) == tuple(sorted(pinned, key=lambda item: item.rev))


def test_a_core_lane_never_pins_user_messages() -> None:
    memory = WorkingMemory(CORE).observe_all(_chat(2))
    assert memory.latest_user is None
    assert memory.events == ()


# -- triggers ----------------------------------------------------------------------------------


def test_nothing_to_compact_in_an_empty_window() -> None:
    assert not should_compact(WorkingMemory("edge").request_compaction(), SMALL, POLICY)


def test_the_token_threshold_triggers() -> None:
    memory = WorkingMemory("edge").observe_all(_chat(1))
    threshold = POLICY.threshold(100)
    assert threshold == 8_000 - 100
    assert not should_compact(memory, PromptSize(threshold, 100), POLICY)
    assert should_compact(memory, PromptSize(threshold + 1, 100), POLICY)
    fixed = CompactionPolicy(threshold_tokens=50)
    assert should_compact(memory, PromptSize(51, 0), fixed)


def test_the_threshold_never_collapses_to_nothing() -> None:
    assert POLICY.threshold(fixed_tokens=9_000) == 1_000


def test_a_full_window_triggers() -> None:
    memory = WorkingMemory("edge").observe_all(_chat(2))  # 7 compactable events
    assert not should_compact(memory, SMALL, POLICY)
    assert should_compact(memory, SMALL, CompactionPolicy(event_window_size=6))


def test_manual_trigger_forces_once() -> None:
    memory = WorkingMemory("edge").observe_all(_chat(1)).request_compaction()
    assert should_compact(memory, SMALL, POLICY)
    request = compaction_request(memory, SMALL, POLICY)
    assert request is not None
    running = memory.begin(request.upto_rev)
    assert not running.forced
    assert not should_compact(running, PromptSize(10**6, 0), POLICY)  # one call at a time
    assert running.request_compaction() == running
    assert not should_compact(running.abandon(), SMALL, POLICY)


# -- what is folded ------------------------------------------------------------------------------


def test_request_folds_the_oldest_half_and_asks_for_a_delta() -> None:
    memory = WorkingMemory("edge").observe_all(_chat(4)).request_compaction()
    request = compaction_request(memory, SMALL, CompactionPolicy(event_window_size=20))
    assert request is not None
    assert request.upto_rev == 8  # two whole turns of four
    assert [item.rev for item in request.folded] == list(range(1, 9))
    system, user = request.messages
    assert '"memory_delta"' in system["content"]
    assert "edge lane" in system["content"]
    first = request.folded[0]
    assert f"[{first.ref}] #1 user: question 0" in user["content"]
    assert "choir.fs.read(" in user["content"]


def test_request_folds_more_than_half_when_half_is_not_enough() -> None:
    memory = WorkingMemory("edge").observe_all(_chat(4)).request_compaction()
    by_count = compaction_request(memory, SMALL, POLICY)  # keep at most 10 // 2 events
    assert by_count is not None
    assert by_count.upto_rev == 11
    tight = CompactionPolicy(threshold_tokens=60)  # keep at most 30 tokens
    by_tokens = compaction_request(memory, SMALL, tight)
    assert by_tokens is not None
    assert by_tokens.upto_rev == 15


def test_fold_never_splits_a_tool_group() -> None:
    memory = WorkingMemory("edge").observe_all(
        _log(
            ("edge", UserMsg(text="q")),
            ("edge", _output("a", "b", "c")),
            ("edge", _result("a")),
            ("edge", _result("b")),
            ("edge", _result("c")),
            ("edge", _output(text="done")),
        )
    )
    request = compaction_request(memory.request_compaction(), SMALL, POLICY)
    assert request is not None
    assert request.upto_rev == 5


def test_an_open_tool_group_is_not_folded() -> None:
    memory = WorkingMemory("edge").observe_all(_log(("edge", _output("compact-now"))))
    assert compaction_request(memory.request_compaction(), SMALL, POLICY) is None


def test_the_compaction_prompt_asks_for_a_rewrite_once_the_summary_is_long() -> None:
    long = ReferenceSummary(summary="word " * 2_000)
    memory = WorkingMemory("edge", summary=long).observe_all(_chat(2)).request_compaction()
    request = compaction_request(memory, SMALL, POLICY)
    assert request is not None
    assert 'use mode "overwrite"' in request.messages[0]["content"]


# -- applying the reply ----------------------------------------------------------------------


def _delta(**fields: Any) -> str:
    return json.dumps({"memory_delta": {"mode": "append", **fields}})


def _started(turns: int = 4) -> tuple[WorkingMemory, int, CommitLog]:
    log = _chat(turns)
    memory = WorkingMemory("edge").observe_all(log).request_compaction()
    request = compaction_request(memory, SMALL, POLICY)
    assert request is not None
    return memory.begin(request.upto_rev), request.upto_rev, log


def test_a_valid_delta_is_applied_atomically() -> None:
    memory, upto, log = _started()
    source = log.entry(1).hash
    fact = {"key": "user.topic", "value": "files", "source_event": source}
    reply = _delta(summary_update="Read c0 and c1.", add_references=[source], add_fact=fact)
    applied = apply_compaction(memory, reply, upto)
    assert isinstance(applied, CompactionApplied)
    new = applied.memory
    assert new.summary.summary == "Read c0 and c1."
    assert new.summary.facts == [Fact(key="user.topic", value="files", source_event=source)]
    assert new.window_start_rev == upto + 1
    assert [item.rev for item in new.events] == list(range(upto + 1, 17))
    assert new.pending is None
    assert new.latest_user is memory.latest_user
    assert applied.event.summary_lane == "edge"
    assert applied.event.window_start_rev == upto + 1
    assert applied.event.delta == MemoryDelta(
        mode="append",
        summary_update="Read c0 and c1.",
        add_references=[source],
        add_fact=Fact(key="user.topic", value="files", source_event=source),
    )
    assert memory.summary == ReferenceSummary()  # the old state is untouched
    assert "Read c0 and c1." in edge_messages_of(new, user_md="", soul_md="")[1]["content"]


def test_events_arriving_during_the_call_stay_in_the_window() -> None:
    memory, upto, log = _started()
    later = log.commit("edge", UserMsg(text="one more thing"))
    memory = memory.observe(later)
    applied = apply_compaction(memory, _delta(summary_update="s"), upto)
    assert isinstance(applied, CompactionApplied)
    assert applied.memory.events[-1].rev == later.rev
    assert applied.memory.latest_user is not None
    assert applied.memory.latest_user.rev == later.rev


def test_committing_the_write_is_idempotent_and_replays_on_recovery() -> None:
    memory, upto, log = _started()
    before = WorkingMemory("edge").observe_all(log)
    applied = apply_compaction(memory, _delta(summary_update="s"), upto)
    assert isinstance(applied, CompactionApplied)
    entry = log.commit("edge", applied.event)
    assert applied.memory.observe(entry) == applied.memory
    recovered = WorkingMemory("edge").observe_all(log)
    assert recovered.summary == applied.memory.summary
    assert recovered.window_start_rev == applied.memory.window_start_rev
    assert [i.rev for i in recovered.events] == [i.rev for i in applied.memory.events]
    assert before.window_start_rev == 1
    other_lane = WorkingMemory(CORE).observe(entry)
    assert other_lane == WorkingMemory(CORE)


@pytest.mark.parametrize(
    "reply",
    [
        "not json at all",
        '{"memory_delta": {"mode": "rewrite", "summary_update": "x"}}',
        '{"memory_delta": {"mode": "append", "summary": "x"}}',
        '{"memory_delta": {"mode": "append", "add_fact": {"key": "", "value": "v"}}}',
        "[]",
    ],
)
def test_an_invalid_delta_changes_nothing_and_retries(reply: str) -> None:
    memory, upto, _ = _started()
    failed = apply_compaction(memory, reply, upto)
    assert isinstance(failed, CompactionFailed)
    assert failed.code == "invalid_delta"
    assert failed.problems
    assert failed.memory.summary == memory.summary
    assert failed.memory.events == memory.events
    assert failed.memory.window_start_rev == memory.window_start_rev
    assert failed.memory.pending is None
    assert compaction_request(failed.memory.request_compaction(), SMALL, POLICY) is not None


def test_a_stale_reply_is_refused() -> None:
    memory, upto, _ = _started()
    failed = apply_compaction(memory, _delta(summary_update="s"), upto - 1)
    assert isinstance(failed, CompactionFailed)
    assert failed.code == "stale"
    applied = apply_compaction(memory, _delta(summary_update="s"), upto)
    assert isinstance(applied, CompactionApplied)
    again = apply_compaction(applied.memory, _delta(summary_update="s"), upto)
    assert isinstance(again, CompactionFailed)
    assert again.code == "stale"


def test_a_summary_past_its_cap_is_refused() -> None:
    memory, upto, _ = _started()
    failed = apply_compaction(memory, _delta(summary_update="x" * 50), upto, max_summary_chars=20)
    assert isinstance(failed, CompactionFailed)
    assert failed.code == "summary_too_long"


@pytest.mark.parametrize(
    "reply",
    [
        '```json\n{"memory_delta": {"mode": "overwrite", "summary_update": "s"}}\n```',
        '{"mode": "overwrite", "summary_update": "s"}',
        '  {"memory_delta": {"mode": "overwrite", "summary_update": "s"}}  ',
    ],
)
def test_fenced_or_bare_deltas_are_read(reply: str) -> None:
    assert parse_delta(reply) == MemoryDelta(mode="overwrite", summary_update="s")


# -- the fold keeps transcripts valid --------------------------------------------------------

CALL_IDS = st.lists(st.sampled_from("abc"), max_size=3)
STEPS = st.lists(
    st.one_of(
        st.builds(lambda: ("edge", UserMsg(text="u"))),
        st.builds(
            lambda ids: ("edge", _output(*ids)), st.lists(st.sampled_from("abc"), max_size=3)
        ),
        st.builds(lambda i: ("edge", _result(i)), st.sampled_from("abc")),
        st.builds(lambda: ("edge", AgentReplied(text="r"))),
    ),
    max_size=25,
)


@settings(max_examples=300)
@given(steps=STEPS, forced=st.booleans())
def test_folding_never_splits_a_call_from_its_result(
    steps: list[tuple[str, Event]], forced: bool
) -> None:
    memory = WorkingMemory("edge").observe_all(_log(*steps))
    if forced:
        memory = memory.request_compaction()
    request = compaction_request(memory, SMALL, CompactionPolicy(event_window_size=4))
    if request is None:
        return
    cut = len(request.folded)
    assert request.folded == memory.events[:cut]
    for call_at, result_at in _pairs([item.event for item in memory.events]):
        assert (call_at < cut) == (result_at < cut), f"fold at {cut} splits {call_at}-{result_at}"


def _pairs(events: list[Event]) -> list[tuple[int, int]]:
    """(call, result) positions the transcript pairs: a result answers the latest tool-calling
    output when it names one of its calls not answered yet."""
    pairs: list[tuple[int, int]] = []
    open_at, waiting = -1, set[str]()
    for index, event in enumerate(events):
        if isinstance(event, ModelOutput) and event.tool_calls:
            open_at, waiting = index, {call.id for call in event.tool_calls}
        elif isinstance(event, ToolResultCommitted) and event.call_id in waiting:
            waiting.discard(event.call_id)
            pairs.append((open_at, index))
    return pairs


def edge_messages_of(*args: Any, **kwargs: Any) -> list[dict[str, Any]]:
    return list(edge_prompt(*args, **kwargs).messages)
