"""The chunker (§11.4): a session's committed events → logical blocks, cut and merged at a cap."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from choir.core.memory.chunking import MIN_CHARS, REDACTED, session_chunks, summary_chunks
from choir.core.memory.chunks import ChunkKind, MemoryChunk
from choir.protocol.log.core_jobs import CoreFinalResult, CoreJobStart
from choir.protocol.log.events import (
    AgentReplied,
    CoreEventEmitted,
    CoreStarted,
    CoreStopped,
    Event,
    MemoryWriteCommitted,
    ModelOutput,
    SessionSummary,
    SkillTransitionCommitted,
    ToolCall,
    ToolCallCommitted,
    ToolCallRequested,
    ToolResultCommitted,
    UserMsg,
)
from choir.protocol.tooling.tools import ToolResult

CAP = 1_000


@dataclass(frozen=True)
class Logged:
    """A committed event as the chunker reads it (`CommittedEvent` without its chain)."""

    rev: int
    lane: str
    event: Event


def log(*events: Event | tuple[str, Event]) -> list[Logged]:
    """Events numbered from rev 1; a (lane, event) pair is on that lane, the rest on edge."""
    return [
        Logged(rev, *(item if isinstance(item, tuple) else ("edge", item)))
        for rev, item in enumerate(events, start=1)
    ]


def said(text: str, *calls: ToolCall, lane: str = "edge") -> ModelOutput:
    return ModelOutput(lane=lane, text=text, tool_calls=list(calls), model="demo")


def call(call_id: str, name: str = "choir.fs.read", **arguments: object) -> ToolCall:
    return ToolCall(id=call_id, name=name, arguments=arguments)


def result(call_id: str, summary: str, name: str = "choir.fs.read", **data: object):
    return ToolResultCommitted(call_id=call_id, tool=name, result=ToolResult.ok(summary, **data))


def skill(name: str, to: str, came: str | None = None, on: str = "start"):
    move = {"skill": name, "from": came, "to": to, "on": on}
    return SkillTransitionCommitted.model_validate(move)


def test_a_tool_call_with_its_result_is_one_block_with_who_said_what():
    events = log(
        UserMsg(text="which port does the server use?"),
        said("Let me read the config.", call("c1", path="deploy/server.toml")),
        ToolCallRequested(call_id="c1", tool="choir.fs.read"),
        ToolCallCommitted(call_id="c1", tool="choir.fs.read", side_effect="read", idempotent=True),
        result("c1", "read 12 lines", content="port = 8443"),
        said("It listens on 8443."),
        AgentReplied(text="It listens on 8443."),
    )
    [chunk] = session_chunks(events, max_chars=CAP)  # small neighbours merged into one
    assert chunk.text == (
        "user: which port does the server use?\n"
        "agent: Let me read the config.\n"
        'tool choir.fs.read {"path":"deploy/server.toml"}\n'
        '  → success: read 12 lines {"content":"port = 8443"}\n'
        "agent: It listens on 8443."  # the reply repeating the model's text is written once
    )
    assert (chunk.index, chunk.first_rev, chunk.last_rev) == (0, 1, 7)


def test_blocks_that_are_not_small_stay_apart():
    long = "word " * 120  # 600 characters: more than a quarter of the cap
    events = log(
        UserMsg(text=long),
        said("", call("c1", path="a.txt")),
        result("c1", "read", content=long),
        said(long),
    )
    chunks = session_chunks(events, max_chars=CAP)
    assert [(c.kind, c.first_rev, c.last_rev) for c in chunks] == [
        (ChunkKind.MESSAGES, 1, 1),
        (ChunkKind.TOOL_CALL, 2, 3),
        (ChunkKind.MESSAGES, 4, 4),
    ]
    assert chunks[1].text.startswith('tool choir.fs.read {"path":"a.txt"}\n  → success: read ')


def test_arguments_and_results_are_cut_and_secrets_under_their_keys_replaced():
    events = log(
        said("", call("c1", "choir.http.get", url="https://x", headers={"Authorization": "B k"})),
        result("c1", "200 OK", "choir.http.get", body="x" * 5_000, api_key="sk-live-123"),
    )
    [chunk] = session_chunks(events, max_chars=CAP)
    assert "sk-live-123" not in chunk.text
    assert '"api_key":"[REDACTED]"' in chunk.text
    assert '"Authorization":"[REDACTED]"' in chunk.text
    assert len(chunk.text) < 800  # the 5,000-character body is cut to a few hundred
    assert "…" in chunk.text


def test_keys_naming_a_secret_are_redacted_and_look_alikes_kept():
    secret = {"accessToken": "a1", "X-Auth-Token": "a2", "client_secret": "a3", "apiKey": "a4"}
    plain = {"passed": 12, "max_tokens": 300, "bypass": "cache", "tokenizer": "bpe"}
    events = log(said("", call("c1", "choir.exec", **secret)), result("c1", "ok", **plain))
    [chunk] = session_chunks(events, max_chars=CAP)
    assert not any(value in chunk.text for value in secret.values())
    assert chunk.text.count(REDACTED) == 4
    assert '"bypass":"cache","max_tokens":300,"passed":12,"tokenizer":"bpe"' in chunk.text


def test_a_skill_phase_is_the_events_of_one_state():
    events = log(
        UserMsg(text="deploy it"),
        skill("deploy", "plan"),
        said("Planning.", call("c1", path="Makefile")),
        result("c1", "read"),
        skill("deploy", "apply", came="plan", on="planned"),
        said("Applying."),
        skill("deploy", "apply", came="apply", on="max_steps"),
        UserMsg(text="thanks"),
    )
    chunks = session_chunks(events, max_chars=200)  # small enough that nothing merges across
    phases = [c for c in chunks if c.kind is ChunkKind.SKILL_PHASE]
    assert phases[0].text == (
        "skill deploy, state plan (starts)\n"
        "agent: Planning.\n"
        'tool choir.fs.read {"path":"Makefile"}\n'
        "  → success: read"
    )
    assert (phases[0].first_rev, phases[0].last_rev) == (2, 4)
    assert phases[1].text.startswith("skill deploy, state apply (from plan on planned)\n")
    assert "skill deploy ended in state apply (max_steps)" in phases[-1].text
    assert chunks[-1].text == "user: thanks"  # after the skill ended: messages again


def test_a_long_phase_is_split_and_each_piece_names_its_state():
    events = log(skill("review", "read"), *(said(f"finding {n}: " + "x " * 40) for n in range(30)))
    chunks = session_chunks(events, max_chars=400)
    assert len(chunks) > 5
    assert all(c.text.startswith("skill review, state read (starts)\n") for c in chunks)
    assert all(len(c.text) <= 400 for c in chunks)
    assert chunks[0].first_rev == 1
    assert [c.first_rev for c in chunks] == sorted(c.first_rev or 0 for c in chunks)


def test_one_oversized_message_is_cut_at_whitespace():
    text = " ".join(f"w{n}" for n in range(2_000))
    [*chunks] = session_chunks(log(UserMsg(text=text)), max_chars=500)
    assert all(len(c.text) <= 500 for c in chunks)
    assert " ".join(c.text for c in chunks) == f"user: {text}"
    assert {(c.first_rev, c.last_rev) for c in chunks} == {(1, 1)}


def test_lanes_are_cut_apart_even_when_their_events_interleave():
    core = "core:build-site"
    events = log(
        UserMsg(text="build the site"),
        (core, CoreStarted(job=CoreJobStart(job_id="j1", job_name="build-site", task_spec="b"))),
        (core, said("", call("k1", "choir.exec", cmd="make"), lane=core)),
        said("Started a job for it."),
        (core, result("k1", "exit 0", "choir.exec")),
        (core, CoreEventEmitted(job_name="build-site", event=CoreFinalResult(summary="built"))),
        (core, CoreStopped(job_name="build-site", job_id="j1", outcome="completed", report="ok")),
    )
    chunks = session_chunks(events, max_chars=CAP)
    edge = [c for c in chunks if "user:" in c.text]
    assert [c.text for c in edge] == ["user: build the site\nagent: Started a job for it."]
    job = [c for c in chunks if c not in edge]
    assert all("core job build-site" in c.text or "choir.exec" in c.text for c in job)
    assert "core job build-site finished: built" in "\n".join(c.text for c in job)


def test_a_call_without_a_result_says_so_and_content_free_events_are_left_out():
    events = log(
        said("", call("c1", "choir.exec", cmd="sleep 100")),
        MemoryWriteCommitted.model_validate(
            {"summary_lane": "edge", "delta": {"mode": "append"}, "window_start_rev": 1}
        ),
        SessionSummary(summary="not here: summary_chunks takes it"),
    )
    [chunk] = session_chunks(events, max_chars=CAP)
    assert chunk.text == 'tool choir.exec {"cmd":"sleep 100"}\n  → choir.exec: no result'
    assert (chunk.first_rev, chunk.last_rev) == (1, 1)


def test_summary_is_cut_per_section():
    summary = SessionSummary(
        summary="We moved the server to port 8443.\n\n" + "Then " + "we tested it. " * 60,
        topics=["deployment", "ports"],
        decisions=["keep 8443", "renew the certificate monthly"],
        open_items=["tell ops"],
    )
    chunks = summary_chunks(summary, max_chars=400)
    assert all(c.kind is ChunkKind.SUMMARY and c.first_rev is None for c in chunks)
    assert [c.index for c in chunks] == list(range(len(chunks)))
    assert chunks[0].text.startswith("Session summary:\nWe moved the server to port 8443.")
    assert all(len(c.text) <= 400 for c in chunks)
    assert chunks[-1].text.endswith(  # small sections merged (after the summary's small tail)
        "\nDecisions:\n- keep 8443\n- renew the certificate monthly\n"
        "Open items:\n- tell ops\nTopics:\ndeployment; ports"
    )
    assert summary_chunks(SessionSummary(summary=""), max_chars=400) == []


def test_a_cap_below_the_minimum_is_refused():
    with pytest.raises(ValueError, match=f"at least {MIN_CHARS}"):
        session_chunks([], max_chars=MIN_CHARS - 1)


# -- properties ------------------------------------------------------------------------------

LANES = ("edge", "core:fix-bug")
words = st.text(alphabet="abcdefgh ", min_size=1, max_size=60).map(str.strip).filter(bool)
step = st.tuples(
    st.sampled_from(LANES),
    st.sampled_from(["user", "say", "call", "result", "skill", "reply", "long"]),
    words,
)


def build(steps: list[tuple[str, str, str]]) -> list[Logged]:
    """A plausible log from drawn steps: calls get ids, results answer the lane's open calls."""
    events: list[Logged] = []
    open_calls: dict[str, list[str]] = {lane: [] for lane in LANES}
    for rev, (lane, kind, text) in enumerate(steps, start=1):
        event: Event
        if kind == "user":
            event = UserMsg(text=text)
        elif kind == "say":
            event = said(text, lane=lane)
        elif kind == "call":
            open_calls[lane].append(f"c{rev}")
            event = said("", call(f"c{rev}", q=text), lane=lane)
        elif kind == "result" and open_calls[lane]:
            event = result(open_calls[lane].pop(0), text)
        elif kind == "skill":
            event = skill("s", text.replace(" ", "") or "x")
        elif kind == "long":
            event = said((text + " ") * 40, lane=lane)
        else:
            event = AgentReplied(text=text)
        events.append(Logged(rev, lane, event))
    return events


@settings(max_examples=200, deadline=None)
@given(steps=st.lists(step, max_size=60), cap=st.integers(MIN_CHARS, 1_500), seed=st.integers())
def test_properties_of_any_log(steps: list[tuple[str, str, str]], cap: int, seed: int):
    events = build(steps)
    chunks = session_chunks(events, max_chars=cap)
    shuffled = list(events)
    random.Random(seed).shuffle(shuffled)
    assert session_chunks(shuffled, max_chars=cap) == chunks  # same events, same chunks
    assert [c.index for c in chunks] == list(range(len(chunks)))
    for chunk in chunks:
        assert 0 < len(chunk.text) <= cap
        assert chunk.first_rev is not None
        assert chunk.last_rev is not None
        assert 1 <= chunk.first_rev <= chunk.last_rev <= len(events)
    assert [c.first_rev for c in chunks] == sorted(c.first_rev or 0 for c in chunks)
    for logged in events:  # every user message is in a chunk covering its revision
        if isinstance(logged.event, UserMsg):
            line = f"user: {logged.event.text}"
            assert any(
                line in c.text and c.first_rev <= logged.rev <= c.last_rev  # type: ignore[operator]
                for c in chunks
            )


@settings(max_examples=100, deadline=None)
@given(
    summary=st.builds(
        SessionSummary,
        summary=st.text(max_size=3_000),
        topics=st.lists(words, max_size=5),
        decisions=st.lists(st.text(min_size=1, max_size=900), max_size=5),
        open_items=st.lists(words, max_size=5),
    ),
    cap=st.integers(MIN_CHARS, 1_500),
)
def test_summary_chunks_fit_and_repeat(summary: SessionSummary, cap: int):
    chunks = summary_chunks(summary, max_chars=cap)
    assert chunks == summary_chunks(summary, max_chars=cap)
    assert all(0 < len(c.text) <= cap for c in chunks)
    for topic in summary.topics:
        assert any(topic in c.text for c in chunks)


# -- speed -----------------------------------------------------------------------------------


def long_session(size: int) -> list[Logged]:
    """A realistic long session: turns of a question, three file reads, an answer."""
    rng = random.Random(7)
    vocabulary = ["deploy", "server", "port", "config", "build", "test", "file", "read", "fix"]

    def text(n: int) -> str:
        return " ".join(rng.choice(vocabulary) for _ in range(n))

    events: list[Event] = []
    while len(events) < size:
        events.append(UserMsg(text=text(20)))
        for k in range(3):
            call_id = f"c{len(events)}-{k}"
            events.append(said(text(10), call(call_id, path=text(3))))
            events.append(ToolCallRequested(call_id=call_id, tool="choir.fs.read"))
            events.append(result(call_id, text(8), content=text(200)))
        answer = text(40)
        events += [said(answer), AgentReplied(text=answer)]
    return log(*events[:size])


@pytest.mark.serial
def test_a_10k_event_session_chunks_in_well_under_a_second():
    events = long_session(10_000)
    started = time.process_time()
    chunks: list[MemoryChunk] = session_chunks(events, max_chars=2_000)
    spent = time.process_time() - started
    assert len(chunks) > 1_000
    assert spent < 1.0, f"chunking 10k events took {spent:.3f} s of CPU"
