"""How an admitted tool call is prepared (input, lockset) and run (built-in, external, host, meta).

Preparation is where workspace paths are confined: a path that escapes the workspace (`..`
above the root, an absolute path other than `/workspace/…`, a symlink leading out) is refused
before any lock is taken. Lock keys use where a path really is (`located_resource`: inside
symlinks followed), so every name of one file shares one lock and a directory's lock covers
what is under it (§9.2).

An external tool's path arguments — those its manifest locks as `file:{field}` — are confined
the same way and handed to the tool as the located path, relative to the workspace root it
runs in: the tool never sees the raw string the model wrote.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel, ValidationError

from choir.agent.kernel.proposal import ToolProposal
from choir.agent.kernel.tool_contract import LockKey, located_resource, resource_at
from choir.agent.kernel.workspace import PathOutsideWorkspace, Workspace
from choir.core.locks.lockset import LockKeyError, LockRequest, Lockset
from choir.errors import ChoirError
from choir.protocol import ToolResult, validation_problems
from choir.protocol.input_fix import invalid_input, pydantic_fix

if TYPE_CHECKING:
    from choir.agent.kernel.registry import RegisteredTool, ToolRegistry


class HostBridge(Protocol):
    """choird's side of host and meta tools (EXECUTE_HOST_TOOL, REQUEST_APPROVAL)."""

    async def execute_host_tool(
        self, tool: str, call_id: str, arguments: dict[str, Any], *, lane: str = ...
    ) -> ToolResult:
        """Run a host tool in choird; a core `lane`'s call carries its job's token (§7.5(3))."""
        ...

    async def request_approval(
        self, request_type: str, payload: dict[str, Any], *, lane: str = ...
    ) -> str:
        """Submit a proposal; returns the approval id. The outcome arrives later as a push. A
        core `lane`'s request carries its job's token (§7.5(3))."""
        ...


class ExternalRunner(Protocol):
    """Runs one call of an external tool's executable (`choir.agent.tools.external`)."""

    async def __call__(
        self,
        exec_path: Path,
        arguments: dict[str, Any],
        *,
        secrets: Mapping[str, str],
        workspace_root: Path,
        timeout_ms: int,
    ) -> ToolResult: ...


SecretsView = Callable[[], Mapping[str, Mapping[str, str]]]
"""The current secret snapshot by resource kind (swapped atomically on refresh, §14.3)."""

LaneHook = Callable[["ToolProposal", dict[str, Any]], Awaitable[ToolResult]]
"""A tool whose implementation is the lane itself (choir.core.*, choir.memory.compact…)."""


@dataclass(frozen=True, slots=True)
class PreparedCall:
    """An admitted call: the tool, its lockset and its validated input."""

    tool: RegisteredTool
    lockset: Lockset
    arguments: dict[str, Any]
    builtin_input: BaseModel | None = None

    @property
    def idempotent(self) -> bool:
        """Safe to run again after a crash: the tool always is (its manifest), or this call is
        (`BuiltinTool.idempotent_when`)."""
        if self.tool.manifest.runtime.idempotent:
            return True
        builtin, given = self.tool.builtin, self.builtin_input
        return (
            builtin is not None
            and builtin.idempotent_when is not None
            and given is not None
            and builtin.idempotent_when(given)
        )


def prepare_call(
    tool: RegisteredTool, arguments: dict[str, Any], workspace: Workspace
) -> PreparedCall | ToolResult:
    """Validate the built-in input model and resolve the lockset; a refusal is a ToolResult.

    Called again by the arbiter after a call waited for its locks: a symlink changed meanwhile
    (by an exec holding workspace:X) moves the keys, and the call must hold the new ones.
    """
    try:
        if tool.builtin is not None:
            model = tool.builtin.input_model.model_validate(arguments)
            lockset = located_lockset(tool.builtin.lock_keys(model), workspace)
            return PreparedCall(tool, lockset, arguments, model)
        return _manifest_call(tool, arguments, workspace)
    except PathOutsideWorkspace as exc:
        return ToolResult.fail(exc.error_code, exc.message)
    except LockKeyError as exc:
        return invalid_input(tool.manifest.name, [str(exc)], "correct that argument")
    except ValidationError as exc:
        return invalid_input(tool.manifest.name, validation_problems(exc), pydantic_fix(exc))


def located_lockset(keys: list[LockKey], workspace: Workspace) -> Lockset:
    """`keys` with every `file:<path>` keyed by where the path really is (`located_resource`)."""
    return Lockset(
        LockRequest(located_resource(workspace, r[5:]) if r.startswith("file:") else r, m)
        for r, m in keys
    )


def _manifest_call(
    tool: RegisteredTool, arguments: dict[str, Any], workspace: Workspace
) -> PreparedCall:
    """Resolve the manifest's lock templates for one call (§9.2) and confine its path arguments:
    a `file:{field}` argument is replaced by its located path."""
    properties = tool.manifest.llm.parameters.get("properties", {})

    def value(name: str) -> str:
        return str(arguments.get(name, properties.get(name, {}).get("default", "")))

    confined = dict(arguments)
    requests: list[LockRequest] = []
    for spec in tool.manifest.runtime.locks:
        fields = spec.template_fields()
        if _whole_path(spec.resource, fields):
            path = confined[fields[0]] = workspace.locate(value(fields[0]))
            resource = resource_at(path)
        else:
            resource = spec.resolve({name: value(name) for name in fields})
            if resource.startswith("file:"):
                resource = located_resource(workspace, resource[5:])
        requests.append(LockRequest(resource, spec.mode))
    return PreparedCall(tool, Lockset(requests), confined)


def _whole_path(template: str, fields: tuple[str, ...]) -> bool:
    """Whether lock template `template` is one whole path argument: `file:{<field>}`."""
    return len(fields) == 1 and template == "file:{" + fields[0] + "}"


class Dispatcher:
    """Runs a prepared call by its implementation kind, under the manifest's timeout."""

    def __init__(
        self,
        *,
        registry: ToolRegistry,
        workspace: Workspace,
        external: ExternalRunner,
        secrets: SecretsView = dict,
        host: HostBridge | None = None,
        lane_hooks: Mapping[str, LaneHook] | None = None,
    ) -> None:
        self._registry = registry
        self._workspace = workspace
        self._external = external
        self._secrets = secrets
        self._host = host
        self._lane_hooks = dict(lane_hooks or {})

    def set_lane_hook(self, tool: str, hook: LaneHook) -> None:
        self._lane_hooks[tool] = hook

    async def run(self, call: PreparedCall, proposal: ToolProposal) -> ToolResult:
        runtime = call.tool.manifest.runtime
        if runtime.implementation == "external" and call.tool.name not in self._lane_hooks:
            # the external runner enforces timeout_ms itself and keeps the tool's stderr
            return await self._run(call, proposal)
        timeout_s = runtime.timeout_ms / 1000
        try:
            async with asyncio.timeout(timeout_s):
                return await self._run(call, proposal)
        except TimeoutError:
            return ToolResult(
                status="timeout",
                summary=f"{proposal.tool} did not finish within {timeout_s:g} s",
                error_code="timeout",
            )

    async def _run(self, call: PreparedCall, proposal: ToolProposal) -> ToolResult:
        tool, runtime = call.tool, call.tool.manifest.runtime
        name = tool.manifest.name
        hook = self._lane_hooks.get(name)
        if hook is not None:
            return await hook(proposal, call.arguments)
        if tool.builtin is not None and call.builtin_input is not None:
            return await tool.builtin.run(self._workspace, call.builtin_input)
        if runtime.implementation == "external":
            return await self._external(
                self._registry.executable(tool),
                call.arguments,
                secrets=self._registry.secrets_for(name, self._secrets()),
                workspace_root=self._workspace.root,
                timeout_ms=runtime.timeout_ms,
            )
        if runtime.implementation == "builtin" and not runtime.meta:
            return ToolResult.fail("not_implemented", f"{name} is not available in this version")
        if self._host is None:
            return ToolResult.fail(
                "host_unavailable", f"{name} needs choird, and choird is not connected"
            )
        if runtime.meta:  # never executes: a proposal for a human (§8.10)
            try:
                approval_id = await self._host.request_approval(
                    name, call.arguments, lane=proposal.lane
                )
            except ChoirError as refused:  # e.g. a skill that would not load: the model fixes it
                return ToolResult.fail("proposal_refused", refused.message)
            return ToolResult.ok(
                f"proposal submitted for approval as {approval_id}; the outcome will follow",
                approval_id=approval_id,
            )
        return await self._host.execute_host_tool(
            name, proposal.call_id, call.arguments, lane=proposal.lane
        )
