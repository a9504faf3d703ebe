"""The tool contract the kernel owns: what a built-in tool hands the arbiter, and how it is locked.

The kernel (registry, dispatch, arbiter) works against these names only; `choir.agent.tools`
implements them. A `BuiltinTool` names its input model, the locks a call takes (§9.2, §9.5) and
its `run`; lock resources are keyed by where a workspace path really is (`located_resource`).
`stop_outcome` is how a tool tells the arbiter that a stopped call's work finished anyway: the
arbiter sets one per call, a tool records into it (`record_finished`).
"""

from __future__ import annotations

import contextvars
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, Literal, TypeVar

from pydantic import BaseModel

from choir.agent.kernel.workspace import CHOIRTMP, Workspace, normalize
from choir.protocol.tooling.tools import ToolResult

LockMode = Literal["S", "X"]
LockKey = tuple[str, LockMode]
"""(resource key, mode) as in §9.2, e.g. `("file:src/a.py", "S")` or `("workspace", "X")`."""

InputT = TypeVar("InputT", bound=BaseModel)


@dataclass(frozen=True)
class BuiltinTool(Generic[InputT]):
    """One runtime-backed tool (§8.8): its name, input model, locks and implementation."""

    name: str
    input_model: type[InputT]
    run: Callable[[Workspace, InputT], Awaitable[ToolResult]]
    lock_keys: Callable[[InputT], list[LockKey]]
    """May raise `PathOutsideWorkspace`: the call is then refused before any lock is taken."""
    idempotent_when: Callable[[InputT], bool] | None = None
    """The calls safe to run again after a crash although the tool's manifest says it is not
    idempotent (`choir.fs.write`'s overwrite puts the same bytes again): their intent is not
    made durable before they run, and a crash leaves them to be run again, not to the operator."""


def path_resource(path: str) -> str:
    """The lock resource of a workspace path as written: `file:<normalized path>`.

    A tool names its locks with it; the dispatcher then keys them by where the path really is
    (`located_resource`) before any lock is taken. Raises `PathOutsideWorkspace` for escapes.
    """
    return f"file:{normalize(path)}"


def located_resource(workspace: Workspace, path: str) -> str:
    """The lock resource of `path` by where it really is (§9.2, DESIGN-NOTES "Concurrency").

    Inside symlinks are followed (`Workspace.locate`), so a symlink and its target share one
    key; `.choirtmp/` has its own `choirtmp` lock, independent of the workspace hierarchy —
    also when a symlink elsewhere leads into it.
    """
    return resource_at(workspace.locate(path))


def resource_at(rel: str) -> str:
    """The lock resource of located path `rel` (see `located_resource`)."""
    if rel == CHOIRTMP or rel.startswith(CHOIRTMP + "/"):
        return "choirtmp"
    return f"file:{rel}"


class StopOutcome:
    """What a call's work did although the call was stopped (`stop_outcome`, set per call by
    the arbiter): the work was past its point of no return, so its result is the truth."""

    __slots__ = ("finished",)

    def __init__(self) -> None:
        self.finished: ToolResult | None = None


stop_outcome: contextvars.ContextVar[StopOutcome | None] = contextvars.ContextVar(
    "stop_outcome", default=None
)


def record_finished(result: ToolResult) -> None:
    """Record that the current call's work finished with `result` although it was stopped."""
    outcome = stop_outcome.get()
    if outcome is not None:
        outcome.finished = result


__all__ = [
    "BuiltinTool",
    "LockKey",
    "LockMode",
    "StopOutcome",
    "located_resource",
    "path_resource",
    "record_finished",
    "resource_at",
    "stop_outcome",
]
