"""The §7.2/§7.3 lane state machines: every named transition, terminations, and illegal moves."""

from __future__ import annotations

import pytest

from choir.core.lane_states import (
    CORE,
    EDGE,
    IllegalTransition,
    core_step,
    edge_step,
    is_final,
)
from choir.protocol.log.lanes import CoreStatus, EdgeStatus


@pytest.mark.parametrize(
    ("state", "trigger", "expected"),
    [
        ("EDGE_IDLE", "user_message", "EDGE_CONTEXT_READY"),
        ("EDGE_CONTEXT_READY", "context_ready", "EDGE_REASONING"),
        ("EDGE_REASONING", "finish", "EDGE_FINALIZING"),
        ("EDGE_REASONING", "tool_proposal", "EDGE_WAITING_TOOL"),
        ("EDGE_REASONING", "core_spawned", "EDGE_REASONING"),
        ("EDGE_WAITING_TOOL", "tool_result", "EDGE_REASONING"),
        ("EDGE_REASONING", "llm_error", "EDGE_FINALIZING"),
        ("EDGE_REASONING", "stopping", "EDGE_FINALIZING"),
        ("EDGE_FINALIZING", "delivered", "EDGE_IDLE"),
        ("EDGE_REASONING", "budget_ask", "EDGE_WAITING_INFO"),
        ("EDGE_WAITING_INFO", "budget_extended", "EDGE_REASONING"),
        ("EDGE_WAITING_INFO", "not_extended", "EDGE_FINALIZING"),
        ("EDGE_WAITING_INFO", "stopping", "EDGE_FINALIZING"),
    ],
)
def test_edge_transitions_of_section_7_2(state: str, trigger: str, expected: str) -> None:
    assert edge_step(state, trigger) == expected  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("state", "trigger", "expected"),
    [
        ("CORE_IDLE", "job_start", "CORE_CREATED"),
        ("CORE_CREATED", "initialized", "CORE_INITIALIZING"),
        ("CORE_INITIALIZING", "llm_called", "CORE_REASONING"),
        ("CORE_REASONING", "final_result", "CORE_COMPLETED"),
        ("CORE_REASONING", "tool_proposal", "CORE_WAITING_TOOL"),
        ("CORE_REASONING", "instruction_injected", "CORE_REASONING"),
        ("CORE_WAITING_TOOL", "instruction_injected", "CORE_WAITING_TOOL"),
        ("CORE_REASONING", "llm_error", "CORE_TERMINATED"),
        ("CORE_WAITING_TOOL", "tool_result", "CORE_REASONING"),
        ("CORE_WAITING_TOOL", "need_info", "CORE_WAITING_INFO"),
        ("CORE_WAITING_INFO", "info_received", "CORE_WAITING_TOOL"),
        ("CORE_WAITING_INFO", "no_answer", "CORE_WAITING_TOOL"),
        ("CORE_INITIALIZING", "budget_ask", "CORE_WAITING_INFO"),
        ("CORE_REASONING", "budget_ask", "CORE_WAITING_INFO"),
        ("CORE_WAITING_TOOL", "budget_ask", "CORE_WAITING_INFO"),
        ("CORE_WAITING_INFO", "budget_extended", "CORE_REASONING"),
    ],
)
def test_core_transitions_of_section_7_3(state: str, trigger: str, expected: str) -> None:
    assert core_step(state, trigger) == expected  # type: ignore[arg-type]


EDGE_LIVE = sorted({s for s, _ in EDGE})
CORE_LIVE = sorted({s for s, _ in CORE})


@pytest.mark.parametrize("state", EDGE_LIVE)
@pytest.mark.parametrize("trigger", ["cancel", "budget_exceeded", "fatal", "shutdown"])
def test_edge_terminates_from_any_live_state(state: EdgeStatus, trigger: str) -> None:
    assert edge_step(state, trigger) == "EDGE_TERMINATED"  # type: ignore[arg-type]


@pytest.mark.parametrize("state", CORE_LIVE)
@pytest.mark.parametrize("trigger", ["cancel", "error", "budget_exceeded", "shutdown"])
def test_core_terminates_from_any_live_state(state: CoreStatus, trigger: str) -> None:
    assert core_step(state, trigger) == "CORE_TERMINATED"  # type: ignore[arg-type]


def test_illegal_moves_name_the_allowed_ones() -> None:
    with pytest.raises(IllegalTransition, match=r"EDGE_IDLE has no transition on 'finish'"):
        edge_step("EDGE_IDLE", "finish")
    with pytest.raises(
        IllegalTransition, match="allowed: budget_ask, final_result, instruction_injected"
    ):
        core_step("CORE_REASONING", "initialized")


@pytest.mark.parametrize("state", ["EDGE_TERMINATED", "CORE_COMPLETED", "CORE_TERMINATED"])
def test_final_states_never_move(state: str) -> None:
    assert is_final(state)  # type: ignore[arg-type]
    move = edge_step if state.startswith("EDGE") else core_step
    with pytest.raises(IllegalTransition, match="is final"):
        move(state, "cancel")  # type: ignore[arg-type]


def test_a_job_waiting_for_information_cannot_reason_or_finish() -> None:
    """Only the answer (or its absence) ends the wait; the call's result commits after it."""
    for trigger in ("tool_result", "final_result", "llm_called", "instruction_injected"):
        with pytest.raises(
            IllegalTransition, match="allowed: budget_extended, info_received, no_answer"
        ):
            core_step("CORE_WAITING_INFO", trigger)  # type: ignore[arg-type]


def test_a_stopping_edge_finishes_its_cycle_before_it_ends() -> None:
    """Graceful stop: the cycle's safe point leads back to IDLE, then shutdown terminates."""
    state: EdgeStatus = "EDGE_WAITING_TOOL"
    for trigger in ("tool_result", "stopping", "delivered", "shutdown"):
        state = edge_step(state, trigger)  # type: ignore[arg-type]
    assert state == "EDGE_TERMINATED"
