"""Tool manifests: the dual view of §8.3 plus the output tagging of §8.5.

The `llm` view is all a model ever sees; the `runtime` view (locks, secrets, side effects,
implementation) stays inside choir. `ToolManifest.llm_view()` renders the OpenAI `tools` entry,
with the canonical dotted name mapped to its wire name (see `choir.protocol.names`).
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cached_property
from typing import Any, Literal, Self

from pydantic import Field, field_validator, model_validator

from choir.protocol.base import WireModel
from choir.protocol.input_fix import invalid_input, schema_fix
from choir.protocol.json_schema import (
    CompiledSchema,
    compile_schema,
    ensure_json_schema,
    violation_errors,
    violation_line,
    violations,
)
from choir.protocol.names import ToolName, to_wire_name
from choir.protocol.problems import invalid
from choir.protocol.tooling.bindings import SecretResource
from choir.protocol.tooling.locks import LockSpec
from choir.protocol.tooling.tools import ToolResult

Implementation = Literal["builtin", "host", "external"]
SideEffect = Literal["none", "read", "write", "external"]
Exposure = Literal["edge", "core", "both", "none"]

META_PREFIX = "choir.propose."
"""Tools under this prefix are meta tools (§8.10): proposals that need human approval."""


class LlmView(WireModel):
    """What the model sees: name, description and the JSON Schema of the arguments."""

    name: ToolName
    """Canonical name, e.g. `choir.fs.read`; sent to the model as its wire name."""
    description: str = Field(min_length=1)
    """When and how to use the tool, written for the model."""
    parameters: dict[str, Any]
    """JSON Schema (Draft 2020-12) of the arguments object; every call is validated against it."""

    @field_validator("parameters")
    @classmethod
    def _is_object_schema(cls, schema: dict[str, Any]) -> dict[str, Any]:
        ensure_json_schema(schema)
        if schema.get("type") != "object":
            raise ValueError('tool parameters must be an object schema ("type": "object")')
        return schema


class RuntimeView(WireModel):
    """How choir runs the tool; never shown to a model."""

    implementation: Implementation
    """`builtin` runs in choir-agent, `host` runs in choird via EXECUTE_HOST_TOOL, `external` is
    an executable baked into the image."""
    exec_path: str | None = None
    """Absolute path of the executable; required for, and only for, external tools."""
    timeout_ms: int = Field(default=30_000, gt=0, le=3_600_000)
    """Wall-clock limit of one call; the call ends with status `timeout` after it."""
    locks: list[LockSpec] = Field(default_factory=list)
    """Locks acquired atomically before each call (§9.3)."""
    network: bool = False
    """Whether the tool reaches the network."""
    secret_resources: list[SecretResource] = Field(default_factory=list)
    """Kinds of bound resources whose secrets the tool may read (§14.3)."""
    side_effect: SideEffect
    """What the tool can change: nothing, reads only, the workspace, or the outside world."""
    idempotent: bool = False
    """Safe to re-run after a crash; non-idempotent intents are never silently re-run."""
    version: str = "1.0"
    """Manifest version, bumped by the tool's author on change."""
    exposure: Exposure = "both"
    """Which lanes are offered the tool; `none` hides it from every model."""
    prompt_mask: bool = False
    """Keep the result out of prompts: models see only its summary and artifact ref (§8.5)."""
    meta: bool = False
    """A proposal tool (choir.propose.*): never executes, never locks, needs approval."""


class ToolManifest(WireModel):
    """One tool: `tools/<name>.json` in a repo, `/choir/tools/**/<name>.json` in an image."""

    llm: LlmView
    """What the model sees."""
    runtime: RuntimeView
    """How choir runs it."""

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        problems = [*_runtime_problems(self.runtime), *_lock_field_problems(self)]
        if self.llm.name.startswith(META_PREFIX) and not self.runtime.meta:
            problems.append(f"runtime.meta: {META_PREFIX}* tools are meta tools; set meta: true")
        if problems:
            raise invalid("; ".join(problems))
        return self

    @property
    def name(self) -> str:
        return self.llm.name

    @property
    def wire_name(self) -> str:
        return to_wire_name(self.llm.name)

    def llm_view(self) -> dict[str, Any]:
        """The OpenAI `tools` entry; the function name is the wire name (`choir__fs__read`)."""
        return {
            "type": "function",
            "function": {
                "name": self.wire_name,
                "description": self.llm.description,
                "parameters": self.llm.parameters,
            },
        }

    def input_problems(self, arguments: Any) -> list[str]:
        """Why `arguments` are not valid input for this tool (empty when they are)."""
        return violations(self._input_validator, arguments)

    def check_input(self, arguments: Any) -> ToolResult | None:
        """None when `arguments` are valid input for this tool; else the `invalid_input` result
        naming the first problem and its fix."""
        errors = violation_errors(self._input_validator, arguments)
        if not errors:
            return None
        problems = [violation_line(error) for error in errors]
        return invalid_input(self.name, problems, schema_fix(errors[0]))

    @cached_property
    def _input_validator(self) -> CompiledSchema:
        return compile_schema(self.llm.parameters)


def _runtime_problems(runtime: RuntimeView) -> Iterator[str]:
    external = runtime.implementation == "external"
    if external and not runtime.exec_path:
        yield (
            'runtime.exec_path: required when implementation is "external" '
            "(e.g. /choir/tools/global/<name>)"
        )
    if not external and runtime.exec_path is not None:
        yield (
            'runtime.exec_path: only "external" tools have an executable; '
            "remove exec_path or set implementation to external"
        )
    if runtime.exec_path and not runtime.exec_path.startswith("/"):
        yield f"runtime.exec_path: {runtime.exec_path!r} must be an absolute path"
    if runtime.meta and runtime.locks:
        yield "runtime.locks: meta tools never hold locks; remove them"
    resources = [lock.resource for lock in runtime.locks]
    if len(set(resources)) != len(resources):
        yield "runtime.locks: each resource may appear only once"


def _lock_field_problems(manifest: ToolManifest) -> Iterator[str]:
    properties = manifest.llm.parameters.get("properties", {})
    required = set(manifest.llm.parameters.get("required", []))
    for index, lock in enumerate(manifest.runtime.locks):
        for field in lock.template_fields():
            where = f"runtime.locks[{index}].resource"
            if field not in properties:
                yield (
                    f"{where}: {lock.resource!r} names input field {field!r}, "
                    "which llm.parameters does not define"
                )
            elif field not in required and "default" not in properties[field]:
                yield (
                    f"{where}: {lock.resource!r} needs input field {field!r} on every call; "
                    "make it required or give it a default"
                )
