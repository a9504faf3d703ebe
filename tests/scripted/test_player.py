"""Step selection, without a server: order, conditions, repeats, exhaustion."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from choir.scripted import ReplyStep, Script, ScriptedCall, Step, ToolCallsStep
from choir.scripted.player import ScriptPlayer, Turn, last_turn


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "system", "content": "s"}, {"role": "user", "content": text}]


def tool(text: str) -> list[dict[str, Any]]:
    call = {"id": "c", "type": "function", "function": {"name": "x__y", "arguments": "{}"}}
    return [
        *user("go"),
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c", "content": text},
    ]


def replies(player: ScriptPlayer, *conversations: list[dict[str, Any]]) -> list[str | None]:
    answers: list[str | None] = []
    for messages in conversations:
        step = player.next_step(messages)
        answers.append(step.text if isinstance(step, ReplyStep) else None)
    return answers


def play(*steps: Step) -> ScriptPlayer:
    return ScriptPlayer(Script(steps=list(steps)))


def test_steps_without_conditions_play_in_order_then_run_out() -> None:
    player = play(ReplyStep(text="one"), ReplyStep(text="two"))
    assert replies(player, user("a"), user("b"), user("c")) == ["one", "two", None]
    assert player.remaining == 0


def test_match_is_a_case_insensitive_substring() -> None:
    player = play(ReplyStep(match="Weather", text="sunny"), ReplyStep(text="other"))
    assert replies(player, user("hello"), user("what's the WEATHER like?")) == ["other", "sunny"]


def test_branches_are_chosen_by_what_was_said() -> None:
    steps = [
        ReplyStep(match_regex=r"(?i)^yes\b", text="great"),
        ReplyStep(match_regex=r"(?i)^no\b", text="too bad"),
    ]
    assert replies(play(*steps), user("No thanks")) == ["too bad"]
    assert replies(play(*steps), user("yes please")) == ["great"]
    assert replies(play(*steps), user("maybe")) == [None]


def test_after_tool_answers_only_a_tool_result() -> None:
    player = play(
        ReplyStep(after="tool", repeat=True, text="got it"), ReplyStep(repeat=True, text="hm")
    )
    assert replies(player, user("x"), tool("result"), tool("again")) == ["hm", "got it", "got it"]


def test_match_looks_at_tool_results_too() -> None:
    player = play(ReplyStep(match="ENOENT", text="missing"), ReplyStep(text="fine"))
    assert replies(player, tool('{"error_code": "ENOENT"}')) == ["missing"]


def test_repeat_steps_are_never_used_up() -> None:
    player = play(ReplyStep(text="once"), ReplyStep(repeat=True, text="always"))
    assert replies(player, user("a"), user("b"), user("c")) == ["once", "always", "always"]
    assert player.remaining == 1


def test_call_ids_are_unique_per_script() -> None:
    player = play(ReplyStep(text="x"))
    assert [player.new_call_id() for _ in range(3)] == ["call_1", "call_2", "call_3"]


@pytest.mark.parametrize(
    ("messages", "turn"),
    [
        ([], None),
        ([{"role": "system", "content": "s"}], None),
        (user("hi"), Turn("user", "hi")),
        (
            [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "image_url"}]}],
            Turn("user", "a"),
        ),
        ([*user("hi"), {"role": "assistant", "content": "hello"}], Turn("user", "hi")),
        (tool("out"), Turn("tool", "out")),
    ],
)
def test_last_turn(messages: list[dict[str, Any]], turn: Turn | None) -> None:
    assert last_turn(messages) == turn


def test_a_templated_step_echoes_what_its_regex_captured() -> None:
    player = play(
        ToolCallsStep(
            match_regex=r"remember (.+)",
            templated=True,
            repeat=True,
            text="storing {1}",
            calls=[ScriptedCall(name="choir.memory.upsert", arguments={"text": "{1}", "n": 2})],
        ),
        ReplyStep(match_regex=r'"text": "((?:[^"\\]|\\.)*)"', templated=True, text="found: {1}"),
    )
    step = player.next_step(user("please remember my editor is {vim}"))
    assert isinstance(step, ToolCallsStep)
    assert step.text == "storing my editor is {vim}"
    assert step.calls[0].arguments == {"text": "my editor is {vim}", "n": 2}
    # a tool message is JSON: the captured text comes back unescaped
    found = replies(player, tool('{"text": "say \\"hi\\"\\nthen go"}'))
    assert found == ['found: say "hi"\nthen go']


def test_templated_needs_a_regex_with_a_group() -> None:
    with pytest.raises(ValidationError, match="templated needs a match_regex"):
        ReplyStep(match="x", templated=True, text="{1}")
    with pytest.raises(ValidationError, match="templated needs a match_regex"):
        ReplyStep(match_regex="x", templated=True, text="{1}")
