"""How a lane state looks: one colour per kind of state, the same in every view.

Lane states are the §7.2/§7.3 names (`choir.protocol.log.lanes`): `EDGE_REASONING`,
`CORE_WAITING_TOOL`… They group into five kinds an operator tells apart at a glance — idle,
reasoning, waiting on a tool, completed, terminated — and each kind has a CSS class (`lane-<kind>`,
coloured in `tui/app.tcss`) and a Rich style for cells of tables and logs.
"""

from __future__ import annotations

from typing import Final, Literal

from rich.text import Text

LaneKind = Literal["idle", "reasoning", "waiting-tool", "completed", "terminated", "unknown"]

_KINDS: Final[dict[str, LaneKind]] = {
    "IDLE": "idle",
    "CREATED": "idle",
    "INITIALIZING": "reasoning",
    "CONTEXT_READY": "reasoning",
    "REASONING": "reasoning",
    "FINALIZING": "reasoning",
    "WAITING_TOOL": "waiting-tool",
    "WAITING_INFO": "waiting-tool",  # a core job's need_info question: its report call waits
    "COMPLETED": "completed",
    "TERMINATED": "terminated",
}

STYLES: Final[dict[LaneKind, str]] = {
    "idle": "#8a8f98",
    "reasoning": "bold #56b6f7",
    "waiting-tool": "bold #e5c07b",
    "completed": "#7ec16e",
    "terminated": "bold #e06c75",
    "unknown": "italic #8a8f98",
}
"""Rich styles per kind (the CSS classes in app.tcss use the same colours)."""


def lane_kind(state: str | None) -> LaneKind:
    """`EDGE_WAITING_TOOL` -> `waiting-tool`; anything unrecognised -> `unknown`."""
    if not state:
        return "unknown"
    _, _, name = state.partition("_")
    return _KINDS.get(name, "unknown")


def lane_style(state: str | None) -> str:
    return STYLES[lane_kind(state)]


def lane_text(state: str | None) -> Text:
    """The state as a coloured cell: `reasoning`, `waiting-tool`… (prefix dropped)."""
    if not state:
        return Text("—", style=STYLES["unknown"])
    _, _, name = state.partition("_")
    return Text(name.lower().replace("_", "-"), style=lane_style(state))
