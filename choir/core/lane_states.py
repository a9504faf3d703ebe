"""The lane state machines of §7.2 (edge) and §7.3 (core jobs), as explicit transition tables.

Pure: `step(table, state, trigger)` returns the next state or raises `IllegalTransition`. The
lane coroutines in choir-agent drive their work (LLM calls, tool proposals, delivery) and move
their state only through `step`, so every state a lane reports (REPORT_STATUS, the TUI) is one the
design allows, reached by a transition the design names.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, Literal

from choir.protocol.log.lanes import CoreStatus, EdgeStatus, LaneStatus

EdgeTrigger = Literal[
    "user_message",
    "context_ready",
    "finish",
    "tool_proposal",
    "core_spawned",
    "tool_result",
    "llm_error",
    "stopping",
    "delivered",
    "budget_ask",
    "budget_extended",
    "not_extended",
    "cancel",
    "budget_exceeded",
    "fatal",
    "shutdown",
]
CoreTrigger = Literal[
    "job_start",
    "initialized",
    "llm_called",
    "final_result",
    "tool_proposal",
    "instruction_injected",
    "tool_result",
    "need_info",
    "info_received",
    "no_answer",
    "budget_ask",
    "budget_extended",
    "llm_error",
    "cancel",
    "error",
    "budget_exceeded",
    "shutdown",
]

TERMINATING: Final = frozenset({"cancel", "budget_exceeded", "fatal", "error", "shutdown"})
"""Triggers that end a lane from any non-terminal state (§7.2 / §7.3 "Any -> TERMINATED").
`shutdown` is the agent's graceful stop (§17.2) ending a lane at its safe point."""

EDGE: Final[Mapping[tuple[EdgeStatus, str], EdgeStatus]] = {
    ("EDGE_IDLE", "user_message"): "EDGE_CONTEXT_READY",
    ("EDGE_CONTEXT_READY", "context_ready"): "EDGE_REASONING",
    ("EDGE_REASONING", "finish"): "EDGE_FINALIZING",
    ("EDGE_REASONING", "tool_proposal"): "EDGE_WAITING_TOOL",
    ("EDGE_REASONING", "core_spawned"): "EDGE_REASONING",
    ("EDGE_WAITING_TOOL", "tool_result"): "EDGE_REASONING",
    ("EDGE_REASONING", "llm_error"): "EDGE_FINALIZING",
    ("EDGE_REASONING", "stopping"): "EDGE_FINALIZING",
    ("EDGE_FINALIZING", "delivered"): "EDGE_IDLE",
    ("EDGE_REASONING", "budget_ask"): "EDGE_WAITING_INFO",
    ("EDGE_WAITING_INFO", "budget_extended"): "EDGE_REASONING",
    ("EDGE_WAITING_INFO", "not_extended"): "EDGE_FINALIZING",
    ("EDGE_WAITING_INFO", "stopping"): "EDGE_FINALIZING",
}
"""§7.2. Edge never waits for cores: it stays conversational while they run. `stopping`: a
graceful stop (§17.2) reached the cycle's safe point, which ends like an LLM error does, with
a message to the user instead of a next step.

A session budget or the spend cap that runs out mid-reply pauses edge (`budget_ask`, issue 19)
in EDGE_WAITING_INFO until a human extends it (`budget_extended`: the next step) or not
(`not_extended`: the reply ends with an error saying why)."""

CORE: Final[Mapping[tuple[CoreStatus, str], CoreStatus]] = {
    ("CORE_IDLE", "job_start"): "CORE_CREATED",
    ("CORE_CREATED", "initialized"): "CORE_INITIALIZING",
    ("CORE_INITIALIZING", "llm_called"): "CORE_REASONING",
    ("CORE_REASONING", "final_result"): "CORE_COMPLETED",
    ("CORE_REASONING", "tool_proposal"): "CORE_WAITING_TOOL",
    ("CORE_REASONING", "instruction_injected"): "CORE_REASONING",
    ("CORE_WAITING_TOOL", "instruction_injected"): "CORE_WAITING_TOOL",
    ("CORE_REASONING", "llm_error"): "CORE_TERMINATED",
    ("CORE_WAITING_TOOL", "tool_result"): "CORE_REASONING",
    ("CORE_WAITING_TOOL", "need_info"): "CORE_WAITING_INFO",
    ("CORE_WAITING_INFO", "info_received"): "CORE_WAITING_TOOL",
    ("CORE_WAITING_INFO", "no_answer"): "CORE_WAITING_TOOL",
    ("CORE_INITIALIZING", "budget_ask"): "CORE_WAITING_INFO",
    ("CORE_REASONING", "budget_ask"): "CORE_WAITING_INFO",
    ("CORE_WAITING_TOOL", "budget_ask"): "CORE_WAITING_INFO",
    ("CORE_WAITING_INFO", "budget_extended"): "CORE_REASONING",
}
"""§7.3. Injection is accepted while reasoning or waiting on a tool (§12.8).

A `need_info` question (§12.7) is a tool call of the job (`choir.core.report`): while edge and
the user answer it the job waits in CORE_WAITING_INFO; edge's answer, an injection, ends the
wait (`info_received`), as do the job's time budget or a graceful stop (`no_answer`). Either way
the call's result commits from CORE_WAITING_TOOL like any other.

A budget that ran out pauses the job at its safe point (`budget_ask`, issue 19): it waits in
CORE_WAITING_INFO for a human to extend the budget (`budget_extended`: the next step) or stop
it (`budget_exceeded`, as before)."""

FINAL: Final[frozenset[str]] = frozenset({"EDGE_TERMINATED", "CORE_COMPLETED", "CORE_TERMINATED"})


class IllegalTransition(Exception):
    """A lane tried a move its state machine does not have: a bug in the lane, not user input."""


def is_final(state: LaneStatus) -> bool:
    return state in FINAL


def edge_step(state: EdgeStatus, trigger: EdgeTrigger) -> EdgeStatus:
    """The edge lane's state after `trigger` (§7.2)."""
    _check_live(state, trigger)
    if trigger in TERMINATING:
        return "EDGE_TERMINATED"
    following = EDGE.get((state, trigger))
    if following is None:
        raise _illegal(state, trigger, [t for (s, t) in EDGE if s == state])
    return following


def core_step(state: CoreStatus, trigger: CoreTrigger) -> CoreStatus:
    """A core job's state after `trigger` (§7.3)."""
    _check_live(state, trigger)
    if trigger in TERMINATING:
        return "CORE_TERMINATED"
    following = CORE.get((state, trigger))
    if following is None:
        raise _illegal(state, trigger, [t for (s, t) in CORE if s == state])
    return following


def _check_live(state: LaneStatus, trigger: str) -> None:
    if state in FINAL:
        raise IllegalTransition(f"{state} is final; {trigger!r} cannot move it")


def _illegal(state: LaneStatus, trigger: str, allowed: list[str]) -> IllegalTransition:
    return IllegalTransition(
        f"{state} has no transition on {trigger!r} (allowed: {', '.join(sorted(allowed))})"
    )
