"""What a built-in tool hands the arbiter, and how filesystem failures become tool results.

The arbiter validates the raw arguments against the manifest's JSON schema, builds the tool's
input model, takes the locks `lock_keys` names (§9.5), then awaits `run`. Failures the model can
act on (bad path, missing file, bad line range) come back as `ToolResult`s with a stable
`error_code`, never as exceptions; cancellation still propagates.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, Literal, TypeVar

from pydantic import BaseModel

from choir.agent.workspace import CHOIRTMP, PathOutsideWorkspace, Workspace, normalize
from choir.protocol.tools import ToolResult

LockMode = Literal["S", "X"]
LockKey = tuple[str, LockMode]
"""(resource key, mode) as in §9.2, e.g. `("file:src/a.py", "S")` or `("workspace", "X")`."""

InputT = TypeVar("InputT", bound=BaseModel)

SANDBOX_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
"""PATH of every subprocess a tool starts."""


@dataclass(frozen=True)
class BuiltinTool(Generic[InputT]):
    """One runtime-backed tool (§8.8): its name, input model, locks and implementation."""

    name: str
    input_model: type[InputT]
    run: Callable[[Workspace, InputT], Awaitable[ToolResult]]
    lock_keys: Callable[[InputT], list[LockKey]]
    """May raise `PathOutsideWorkspace`: the call is then refused before any lock is taken."""


class ToolFailure(Exception):
    """A failure the model can act on, raised inside a tool body and returned as a result."""

    def __init__(self, error_code: str, summary: str) -> None:
        super().__init__(summary)
        self.error_code = error_code
        self.summary = summary


def path_resource(path: str) -> str:
    """The lock resource of a workspace path.

    `.choirtmp/` has its own `choirtmp` lock, independent of the workspace hierarchy (§9.2);
    everything else is `file:<normalized path>`. Keys are lexical: a file reached through a
    symlink under another name gets another key.
    """
    rel = normalize(path)
    if rel == CHOIRTMP or rel.startswith(CHOIRTMP + "/"):
        return "choirtmp"
    return f"file:{rel}"


def sandbox_env(home: str) -> dict[str, str]:
    """The whole environment of a tool subprocess: nothing of choir-agent's (secrets) leaks.

    Tools get the workspace as HOME, so git is pointed at the agent's own git config (the
    leased identity's name, email and credential helper, §14.4; it holds no token) when the
    runtime wrote one (`CHOIR_GITCONFIG`, set by choir.agent.git_identity).
    """
    env = {"PATH": SANDBOX_PATH, "HOME": home, "LANG": "C.UTF-8"}
    agent_gitconfig = os.environ.get("CHOIR_GITCONFIG")
    if agent_gitconfig:
        env["GIT_CONFIG_GLOBAL"] = agent_gitconfig
    return env


def fs_failure(exc: PathOutsideWorkspace | OSError, path: str) -> ToolResult:
    """A filesystem error as a result that names the path as given, never a host path."""
    if isinstance(exc, PathOutsideWorkspace):
        return ToolResult.fail(exc.error_code, exc.message)
    if isinstance(exc, FileNotFoundError):
        return ToolResult.fail("not_found", f"no such file or directory: {path}")
    if isinstance(exc, IsADirectoryError):
        return ToolResult.fail("is_a_directory", f"{path} is a directory, not a file")
    if isinstance(exc, NotADirectoryError):
        return ToolResult.fail("not_a_directory", f"a component of {path} is not a directory")
    if isinstance(exc, PermissionError):
        return ToolResult.fail("permission_denied", f"permission denied: {path}")
    return ToolResult.fail("io_error", f"{path}: {exc.strerror or type(exc).__name__}")


async def run_blocking(path: str, body: Callable[[], ToolResult]) -> ToolResult:
    """Run a blocking filesystem body in a thread, turning expected failures into results."""
    try:
        return await asyncio.to_thread(body)
    except ToolFailure as exc:
        return ToolResult.fail(exc.error_code, exc.summary)
    except (PathOutsideWorkspace, OSError) as exc:
        return fs_failure(exc, path)
