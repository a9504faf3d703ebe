"""The tool registry of choir-agent (§8.8): every tool manifest in the image, checked once at start.

Start-up follows §8.8. The built-in implementations are handed in; `tools/global/*.json` and then
`tools/agent/*.json` are scanned; each manifest is parsed and validated, its file must be named
after the tool, an external tool's executable must exist and be executable, and a builtin tool
must have an in-process implementation (host tools run in choird and meta tools never run, so
neither needs one here). An agent manifest replaces a global one of the same name and the
registry records which. Every problem in every file is collected and any problem fails start-up:
an agent with half its tools would be worse than one that does not start. Afterwards the registry
is immutable (no runtime installs).

Manifests name executables by their in-image path (`/choir/tools/global/foo`). `root` is where
the image's `/choir` tree is on this host: `/choir` in a container, a directory elsewhere (the
process runtime, tests). The `/choir/` prefix of `exec_path` is mapped onto `root`.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath
from types import MappingProxyType
from typing import Any, Final, Literal, final

from pydantic import ValidationError

from choir.agent.kernel.tool_contract import BuiltinTool
from choir.config.jsonparse import parse_json_object
from choir.errors import ConfigError
from choir.protocol.json_schema import fast_checks
from choir.protocol.log.lanes import EDGE_LANE
from choir.protocol.problems import validation_problems
from choir.protocol.tooling.manifest import Exposure, ToolManifest
from choir.protocol.tooling.tools import ToolResult
from choir.protocol.wire.version import tool_manifest_hash

__all__ = [
    "IMAGE_ROOT",
    "LaneKind",
    "RegisteredTool",
    "ToolOrigin",
    "ToolRegistry",
    "ToolSecrets",
    "lane_kind_of",
]

ToolOrigin = Literal["global", "agent"]
"""Which tools directory a manifest came from; later origins override earlier ones."""
LaneKind = Literal["edge", "core"]

IMAGE_ROOT: Final = PurePosixPath("/choir")
"""Where the tool tree lives in the image (§15.1); `exec_path` values start here."""
IMAGE_TOOLS: Final = IMAGE_ROOT / "tools"
ORIGINS: Final[tuple[ToolOrigin, ...]] = ("global", "agent")
HEADER: Final = "invalid tool manifests:"
_OFFERED: Final[Mapping[LaneKind, frozenset[Exposure]]] = {
    "edge": frozenset({"edge", "both"}),
    "core": frozenset({"core", "both"}),
}
"""The exposures each lane is offered; `none` is in neither."""


@dataclass(frozen=True)
class RegisteredTool:
    """One tool as loaded: its manifest, where it came from, and what runs it."""

    manifest: ToolManifest
    source: str
    """The manifest file relative to the root, e.g. `tools/agent/choir.notes.add.json`."""
    origin: ToolOrigin
    builtin: BuiltinTool[Any] | None = None
    """The in-process implementation of a builtin tool; None for host, meta and external tools."""
    executable: Path | None = None
    """Host path of an external tool's executable (`exec_path` mapped onto the root)."""
    replaces: str | None = None
    """The global manifest this agent manifest overrides, e.g. `tools/global/choir.exec.json`."""

    @property
    def name(self) -> str:
        return self.manifest.name


@final
class ToolSecrets(Mapping[str, str]):
    """The secrets one tool may read (§14.3): read-only, and its repr names them, never values."""

    __slots__ = ("_values",)

    def __init__(self, values: Mapping[str, str] | None = None) -> None:
        self._values: Mapping[str, str] = MappingProxyType(dict(values or {}))

    def __getitem__(self, name: str) -> str:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"ToolSecrets(names={sorted(self._values)!r})"


@final
class ToolRegistry:
    """The immutable set of tools an agent can call, keyed by canonical name."""

    __slots__ = ("_by_wire", "_tools", "_unavailable", "_views")

    def __init__(
        self, tools: Mapping[str, RegisteredTool], unavailable: Collection[str] = ()
    ) -> None:
        self._tools: Mapping[str, RegisteredTool] = MappingProxyType(dict(sorted(tools.items())))
        self._by_wire: Mapping[str, str] = {t.manifest.wire_name: name for name, t in tools.items()}
        self._unavailable = frozenset(unavailable)
        self._views: dict[
            tuple[LaneKind, frozenset[str] | None, frozenset[str]], tuple[dict[str, Any], ...]
        ] = {}
        """`llm_tools` answers: every model call of a lane asks for the same list."""

    @classmethod
    def load(
        cls,
        root: Path,
        builtins: Mapping[str, BuiltinTool[Any]],
        *,
        runtime_tools: Collection[str] = (),
        unavailable: Collection[str] = (),
    ) -> ToolRegistry:
        """Scan `<root>/tools/{global,agent}`; raise ConfigError listing every problem found.

        `builtins` are the in-process implementations by tool name; `runtime_tools` names builtin
        tools the agent runtime implements itself rather than as a `BuiltinTool` (lane hooks such
        as `choir.core.spawn`), which therefore need no entry in `builtins`. `unavailable` names
        manifests without an implementation in this version: registered (skills may name them, the
        manifest hash covers them) but never offered to a lane, so no model is shown a tool that
        cannot run.
        """
        fast_checks()  # every tool call is validated with jsonschema-rs: the manifests use it too
        scan = _Scan(root, builtins, frozenset(runtime_tools) | frozenset(unavailable))
        problems: list[str] = []
        tools: dict[str, RegisteredTool] = {}
        for origin in ORIGINS:
            for path in _manifest_files(root, origin, problems):
                tool = _load_tool(scan, origin, path, problems)
                if tool is not None:
                    previous = tools.get(tool.name)
                    tools[tool.name] = replace(tool, replaces=previous.source if previous else None)
        if problems:
            raise ConfigError(problems, header=HEADER)
        return cls(tools, unavailable)

    def get(self, name: str) -> RegisteredTool | None:
        return self._tools.get(name)

    def names(self) -> list[str]:
        """Every canonical tool name, sorted."""
        return list(self._tools)

    def names_for_lane(self, lane: str) -> list[str]:
        """The sorted names offered to lane id `lane` (`edge` or `core:<job>`) by exposure."""
        return [tool.name for tool in self._offered(lane_kind_of(lane))]

    def executable(self, tool: RegisteredTool) -> Path:
        """The host path of external tool `tool`'s executable (checked at load)."""
        if tool.executable is None:
            raise ValueError(f"{tool.name} is not an external tool; it has no executable")
        return tool.executable

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __len__(self) -> int:
        return len(self._tools)

    def llm_tools(
        self,
        lane_kind: LaneKind,
        only: Collection[str] | None = None,
        withheld: frozenset[str] = frozenset(),
    ) -> list[dict[str, Any]]:
        """The OpenAI `tools` parameter for a lane, sorted by name (stable prompts cache well).

        Only tools whose exposure offers them to `lane_kind`, and, when `only` is given (a skill
        state's allowed tools), only those; never those `withheld` (their service is not
        configured now). Each entry is exactly `ToolManifest.llm_view()`, built once (the
        registry never changes) and shared by every list returned: never changed.
        """
        allowed = None if only is None else frozenset(only)
        views = self._views.get((lane_kind, allowed, withheld))
        if views is None:
            views = self._views[lane_kind, allowed, withheld] = tuple(
                tool.manifest.llm_view()
                for tool in self._offered(lane_kind)
                if (allowed is None or tool.name in allowed) and tool.name not in withheld
            )
        return list(views)

    def _offered(self, lane_kind: LaneKind) -> Iterator[RegisteredTool]:
        exposures = _OFFERED[lane_kind]
        return (
            t
            for t in self._tools.values()
            if t.manifest.runtime.exposure in exposures and t.name not in self._unavailable
        )

    def from_wire_name(self, wire: str) -> str | None:
        """The canonical name of a function name the model called, or None if no such tool."""
        return self._by_wire.get(wire)

    def manifest_hash(self) -> str:
        """version.json's `tool_manifest_hash` of the merged tool set (order-independent)."""
        return tool_manifest_hash(tool.manifest for tool in self._tools.values())

    def secrets_for(self, name: str, bound: Mapping[str, Mapping[str, str]]) -> ToolSecrets:
        """The secrets tool `name` may read: those of the resource kinds its manifest names.

        `bound` maps a resource kind (`git_identity`, `notion`…) to the secrets of the resource the
        session is bound to, `{secret_name: value}`. A tool without `secret_resources` (such as
        `choir.exec`) gets nothing; an unbound kind contributes nothing.
        """
        tool = self._tools.get(name)
        if tool is None:
            raise LookupError(f"no tool named {name!r} in the registry")
        kinds = tool.manifest.runtime.secret_resources
        return ToolSecrets(
            {key: value for kind in kinds for key, value in bound.get(kind, {}).items()}
        )

    def result_for_prompt(self, name: str, result: ToolResult) -> dict[str, Any]:
        """What the model is shown of a result: all of it, or under `prompt_mask` (§8.5) only the
        status, summary and artifact ref. Unknown tools (a hallucinated name) are not masked."""
        tool = self._tools.get(name)
        if tool is None or not tool.manifest.runtime.prompt_mask:
            return result.model_dump(mode="json", exclude_none=True)
        masked = {"status": result.status, "summary": result.summary}
        if result.artifact_ref is not None:
            masked["artifact_ref"] = result.artifact_ref
        return masked


def lane_kind_of(lane: str) -> LaneKind:
    """The kind of lane id `lane`: `edge`, or `core` for `core:<job-name>` (and `core` itself)."""
    return "edge" if lane == EDGE_LANE else "core"


def _manifest_files(root: Path, origin: ToolOrigin, problems: list[str]) -> list[Path]:
    """The manifests of one tools directory; the agent directory is optional."""
    directory = root / "tools" / origin
    if directory.is_dir():
        return sorted(directory.glob("*.json"))
    if origin == "global":
        problems.append(f"tools/global: no such directory under {root}; is {root} the image root?")
    return []


@dataclass(frozen=True)
class _Scan:
    """What the manifests of one start-up are checked against."""

    root: Path
    builtins: Mapping[str, BuiltinTool[Any]]
    runtime_tools: frozenset[str]

    def implements(self, name: str) -> bool:
        return name in self.builtins or name in self.runtime_tools

    def builtin_of(self, manifest: ToolManifest) -> BuiltinTool[Any] | None:
        if manifest.runtime.implementation != "builtin":
            return None
        return self.builtins.get(manifest.name)


def _load_tool(
    scan: _Scan, origin: ToolOrigin, path: Path, problems: list[str]
) -> RegisteredTool | None:
    """Read and check one manifest; None (with `problems` extended) when it is unusable."""
    source = f"tools/{origin}/{path.name}"
    found: list[str] = []
    executable: Path | None = None
    manifest = _read_manifest(path, found)
    if manifest is not None:
        found.extend(_name_problems(manifest, path))
        found.extend(_builtin_problems(manifest, scan))
        executable, exec_problems = _executable(manifest, scan.root)
        found.extend(exec_problems)
    problems.extend(f"{source}: {problem}" for problem in found)
    if manifest is None or found:
        return None
    return RegisteredTool(manifest, source, origin, scan.builtin_of(manifest), executable)


def _read_manifest(path: Path, problems: list[str]) -> ToolManifest | None:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        problems.append("not valid UTF-8")
        return None
    except OSError as err:
        problems.append(f"cannot read: {err.strerror or type(err).__name__}")
        return None
    parsed = parse_json_object(text, "")
    problems.extend(problem.removeprefix(": ") for problem in parsed.problems)
    if parsed.data is None:
        return None
    try:
        return ToolManifest.model_validate(parsed.data)
    except ValidationError as err:
        problems.extend(validation_problems(err))
        return None


def _name_problems(manifest: ToolManifest, path: Path) -> list[str]:
    if manifest.name == path.stem:
        return []
    return [
        f"llm.name: {manifest.name!r} must match the file name {path.name!r}; "
        f"rename the file to {manifest.name}.json"
    ]


def _builtin_problems(manifest: ToolManifest, scan: _Scan) -> list[str]:
    runtime = manifest.runtime
    if runtime.implementation != "builtin" or runtime.meta or scan.implements(manifest.name):
        return []
    return [
        f"runtime.implementation: no built-in implementation for tool {manifest.name!r}; "
        'make it "external" with an exec_path, or "host"'
    ]


def _executable(manifest: ToolManifest, root: Path) -> tuple[Path | None, list[str]]:
    """The host path of an external tool's executable, or why it cannot be run."""
    exec_path = manifest.runtime.exec_path
    if exec_path is None:
        return None, []
    image_path = PurePosixPath(exec_path)
    if ".." in image_path.parts or not image_path.is_relative_to(IMAGE_TOOLS):
        return None, [
            f"runtime.exec_path: {exec_path!r} is not under {IMAGE_TOOLS}/; external tools are "
            "baked into the image next to their manifest"
        ]
    host_path = root.joinpath(*image_path.relative_to(IMAGE_ROOT).parts)
    where = "" if str(host_path) == exec_path else f" (looked for {host_path})"
    if not host_path.exists():
        problem = f"does not exist{where}; put the executable next to its manifest"
    elif not host_path.is_file():
        problem = f"is not a file{where}"
    elif not os.access(host_path, os.X_OK):
        problem = f"is not executable{where}; run chmod +x on it"
    else:
        return host_path, []
    return None, [f"runtime.exec_path: {exec_path!r} {problem}"]
