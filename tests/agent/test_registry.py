"""The tool registry loaded from a real /choir-like tree: the seed tools, agent overrides, every
kind of invalid manifest, exposure, wire names, the manifest hash and secret scoping."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from choir.agent.kernel.registry import ToolRegistry
from choir.agent.tools.builtin import BUILTIN_TOOLS
from choir.agent.tools.external import run_external
from choir.core.integrations import NOT_IN_THIS_VERSION
from choir.errors import ConfigError, ExitCode
from choir.protocol.tooling.manifest import ToolManifest
from choir.protocol.tooling.tools import ToolResult
from choir.protocol.wire.version import tool_manifest_hash

SEED_TOOLS = Path(__file__).parents[2] / "seeds" / "global" / "tools"
FIXTURES = Path(__file__).parent / "fixtures"
SEEDS = {
    path.stem: ToolManifest.model_validate_json(path.read_text())
    for path in sorted(SEED_TOOLS.glob("*.json"))
}
BOUND = {
    "git_identity": {"git-dev-token": "ghp-token-value"},
    "notion": {"notion-personal-key": "notion-secret-value"},
    "email": {"mail-password": "mail-secret-value"},
}


RUNTIME_TOOLS = frozenset(
    name
    for name, manifest in SEEDS.items()
    if manifest.runtime.implementation == "builtin"
    and not manifest.runtime.meta
    and name not in BUILTIN_TOOLS
)
"""Seed builtins the agent runtime implements itself (lane hooks, email, notion…)."""


def manifest(name: str, implementation: str = "external", **runtime: Any) -> dict[str, Any]:
    """A small valid manifest; external tools default to an executable next to their manifest."""
    body: dict[str, Any] = {"implementation": implementation, "side_effect": "read", **runtime}
    if implementation == "external":
        body.setdefault("exec_path", f"/choir/tools/agent/{name}")
    parameters = {"type": "object", "properties": {"mode": {"type": "string"}}}
    return {
        "llm": {"name": name, "description": f"The {name} test tool.", "parameters": parameters},
        "runtime": body,
    }


def put(root: Path, origin: str, filename: str, content: dict[str, Any] | str) -> Path:
    path = root / "tools" / origin / filename
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content if isinstance(content, str) else json.dumps(content, indent=2))
    return path


def put_executable(root: Path, origin: str, filename: str, mode: int = 0o755) -> Path:
    path = root / "tools" / origin / filename
    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(FIXTURES / "echo_tool.py", path)
    path.chmod(mode)
    return path


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A /choir-like tree holding the seed tools in tools/global."""
    image = tmp_path / "choir"
    shutil.copytree(SEED_TOOLS, image / "tools" / "global")
    return image


def load(root: Path) -> ToolRegistry:
    return ToolRegistry.load(root, BUILTIN_TOOLS, runtime_tools=RUNTIME_TOOLS)


def load_problems(root: Path, runtime_tools: frozenset[str] = RUNTIME_TOOLS) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        ToolRegistry.load(root, BUILTIN_TOOLS, runtime_tools=runtime_tools)
    assert caught.value.exit_code == ExitCode.CONFIG
    assert str(caught.value).startswith("invalid tool manifests:\n")
    return caught.value.problems


def test_the_seed_tree_loads(root: Path) -> None:
    registry = load(root)

    assert registry.names() == sorted(SEEDS)
    exec_tool = registry.get("choir.exec")
    assert exec_tool is not None
    assert exec_tool.origin == "global"
    assert exec_tool.source == "tools/global/choir.exec.json"
    assert exec_tool.builtin is BUILTIN_TOOLS["choir.exec"]
    assert exec_tool.replaces is None
    assert exec_tool.manifest == SEEDS["choir.exec"]


def test_host_meta_and_runtime_tools_need_no_builtin_tool(root: Path) -> None:
    registry = load(root)

    for name in (
        "choir.web.browse",
        "choir.memory.query",
        "choir.propose.tool",
        "choir.core.spawn",
    ):
        tool = registry.get(name)
        assert tool is not None
        assert tool.builtin is None
        assert name not in BUILTIN_TOOLS


def test_unavailable_tools_are_registered_but_never_offered(root: Path) -> None:
    unavailable = NOT_IN_THIS_VERSION | {"choir.web.browse"}  # as one not built would be
    registry = ToolRegistry.load(
        root, BUILTIN_TOOLS, runtime_tools=RUNTIME_TOOLS, unavailable=unavailable
    )
    offered = {
        tool["function"]["name"] for tool in registry.llm_tools("edge") + registry.llm_tools("core")
    }
    for name in unavailable:
        assert registry.get(name) is not None  # skills may name it; the manifest hash covers it
        assert SEEDS[name].wire_name not in offered
        assert name not in registry.names_for_lane("edge") + registry.names_for_lane("core:j")
    assert SEEDS["choir.fs.read"].wire_name in offered


def test_agent_manifests_override_global_ones_and_say_so(root: Path) -> None:
    override = SEEDS["choir.fs.read"].model_dump(mode="json")
    override["llm"]["description"] = "The agent's own take on reading files, long enough to read."
    put(root, "agent", "choir.fs.read.json", override)
    put(root, "agent", "demo.echo.json", manifest("demo.echo"))
    executable = put_executable(root, "agent", "demo.echo")

    registry = load(root)

    read = registry.get("choir.fs.read")
    assert read is not None
    assert read.origin == "agent"
    assert read.source == "tools/agent/choir.fs.read.json"
    assert read.replaces == "tools/global/choir.fs.read.json"
    assert read.manifest.llm.description.startswith("The agent's own take")
    echo = registry.get("demo.echo")
    assert echo is not None
    assert (echo.origin, echo.replaces, echo.executable) == ("agent", None, executable)
    assert len(registry) == len(SEEDS) + 1


def test_an_external_override_of_a_builtin_runs_the_executable(root: Path) -> None:
    put(root, "agent", "choir.fs.read.json", manifest("choir.fs.read"))
    executable = put_executable(root, "agent", "choir.fs.read")

    registry = load(root)

    read = registry.get("choir.fs.read")
    assert read is not None
    assert read.builtin is None
    assert registry.executable(read) == executable
    exec_tool = registry.get("choir.exec")
    assert exec_tool is not None
    with pytest.raises(ValueError, match=r"choir\.exec is not an external tool"):
        registry.executable(exec_tool)


@pytest.mark.parametrize(
    ("filename", "content", "expected"),
    [
        pytest.param(
            "demo.broken.json",
            '{\n  "llm": {\n    "name": "demo.broken",\n  }\n}\n',
            "tools/agent/demo.broken.json: invalid JSON at line 4, column 3: "
            "Expecting property name enclosed in double quotes",
            id="malformed-json",
        ),
        pytest.param(
            "demo.slow.json",
            manifest("demo.slow", "builtin", timeout_ms=0),
            "tools/agent/demo.slow.json: runtime.timeout_ms: Input should be greater than 0",
            id="schema-violation",
        ),
        pytest.param(
            "demo.other.json",
            manifest("demo.named", "host"),
            "tools/agent/demo.other.json: llm.name: 'demo.named' must match the file name "
            "'demo.other.json'; rename the file to demo.named.json",
            id="name-stem-mismatch",
        ),
        pytest.param(
            "demo.native.json",
            manifest("demo.native", "builtin"),
            "tools/agent/demo.native.json: runtime.implementation: no built-in implementation "
            'for tool \'demo.native\'; make it "external" with an exec_path, or "host"',
            id="builtin-without-implementation",
        ),
        pytest.param(
            "demo.ghost.json",
            manifest("demo.ghost"),
            "tools/agent/demo.ghost.json: runtime.exec_path: '/choir/tools/agent/demo.ghost' "
            "does not exist (looked for {root}/tools/agent/demo.ghost); "
            "put the executable next to its manifest",
            id="missing-executable",
        ),
        pytest.param(
            "demo.escape.json",
            manifest("demo.escape", exec_path="/usr/bin/env"),
            "tools/agent/demo.escape.json: runtime.exec_path: '/usr/bin/env' is not under "
            "/choir/tools/; external tools are baked into the image next to their manifest",
            id="executable-outside-the-image",
        ),
        pytest.param(
            "demo.dup.json",
            '{"llm": {}, "llm": {}, "runtime": {}}',
            "tools/agent/demo.dup.json: duplicate key 'llm'",
            id="duplicate-key",
        ),
    ],
)
def test_each_kind_of_invalid_manifest_is_named_with_file_and_path(
    root: Path, filename: str, content: dict[str, Any] | str, expected: str
) -> None:
    put(root, "agent", filename, content)

    assert expected.format(root=root) in load_problems(root)


def test_a_non_executable_file_is_refused(root: Path) -> None:
    put(root, "agent", "demo.plain.json", manifest("demo.plain"))
    put_executable(root, "agent", "demo.plain", mode=0o644)

    assert load_problems(root) == [
        f"tools/agent/demo.plain.json: runtime.exec_path: '/choir/tools/agent/demo.plain' "
        f"is not executable (looked for {root}/tools/agent/demo.plain); run chmod +x on it"
    ]


def test_every_problem_in_every_file_is_reported_at_once(root: Path) -> None:
    put(root, "global", "demo.bad.json", manifest("demo.bad", "builtin", side_effect="some"))
    put(root, "agent", "demo.ghost.json", manifest("demo.ghost"))
    put(root, "agent", "demo.wrong.json", manifest("demo.right", "builtin"))
    (root / "tools" / "global" / "choir.exec.json").write_text("[1, 2")

    problems = load_problems(root)

    assert [problem.split(":")[0] for problem in problems] == [
        "tools/global/choir.exec.json",
        "tools/global/demo.bad.json",
        "tools/agent/demo.ghost.json",
        "tools/agent/demo.wrong.json",
        "tools/agent/demo.wrong.json",
    ]
    assert problems[1].startswith("tools/global/demo.bad.json: runtime.side_effect: Input should")


def test_the_seed_builtins_without_an_implementation_are_all_listed(root: Path) -> None:
    problems = load_problems(root, runtime_tools=frozenset())

    assert len(problems) == len(RUNTIME_TOOLS)
    for name in RUNTIME_TOOLS:
        assert f"no built-in implementation for tool {name!r}" in "\n".join(problems)


def test_a_missing_global_directory_fails_start_up(tmp_path: Path) -> None:
    assert load_problems(tmp_path) == [
        f"tools/global: no such directory under {tmp_path}; is {tmp_path} the image root?"
    ]


def test_exposure_decides_which_lane_is_offered_a_tool(root: Path) -> None:
    put(root, "agent", "demo.hidden.json", manifest("demo.hidden", "host", exposure="none"))
    put(root, "agent", "demo.deep.json", manifest("demo.deep", "host", exposure="core"))
    registry = load(root)

    edge = {tool["function"]["name"] for tool in registry.llm_tools("edge")}
    core = {tool["function"]["name"] for tool in registry.llm_tools("core")}

    assert "choir__core__spawn" in edge
    assert "choir__core__spawn" not in core
    assert "demo__deep" in core
    assert "demo__deep" not in edge
    assert "demo__hidden" not in edge | core
    assert {"choir__exec", "choir__fs__read"} <= edge & core


def test_names_for_lane_follow_exposure(root: Path) -> None:
    registry = load(root)

    edge = registry.names_for_lane("edge")
    core = registry.names_for_lane("core:refactor-auth")

    assert "choir.core.spawn" in edge
    assert "choir.core.spawn" not in core
    assert "choir.exec" in edge
    assert "choir.exec" in core
    assert core == sorted(core)
    assert [tool["function"]["name"] for tool in registry.llm_tools("core")] == [
        name.replace(".", "__") for name in core
    ]


def test_llm_tools_are_exactly_the_llm_views_restricted_to_a_state(root: Path) -> None:
    registry = load(root)

    tools = registry.llm_tools("core", only=["choir.fs.write", "choir.fs.read", "choir.core.spawn"])

    assert tools == [SEEDS["choir.fs.read"].llm_view(), SEEDS["choir.fs.write"].llm_view()]
    for tool in registry.llm_tools("edge"):
        assert set(tool) == {"type", "function"}
        assert set(tool["function"]) == {"name", "description", "parameters"}


def test_each_call_gets_its_own_list_of_the_same_views(root: Path) -> None:
    """The views are built once per lane kind and state; a caller extending its list (the lane
    adds the skill control tools) leaves the next caller's alone."""
    registry = load(root)
    only = ["choir.fs.write", "choir.fs.read"]

    first = registry.llm_tools("edge")
    first.append({"type": "function", "function": {"name": "extra"}})
    restricted = registry.llm_tools("core", only=only)
    restricted.clear()

    assert registry.llm_tools("edge") == first[:-1]
    assert registry.llm_tools("core", only=reversed(only)) == [
        SEEDS["choir.fs.read"].llm_view(),
        SEEDS["choir.fs.write"].llm_view(),
    ]


def test_wire_names_round_trip(root: Path) -> None:
    registry = load(root)

    for name in registry.names():
        tool = registry.get(name)
        assert tool is not None
        assert registry.from_wire_name(tool.manifest.wire_name) == name
    assert registry.from_wire_name("choir__fs__read") == "choir.fs.read"
    assert registry.from_wire_name("choir.fs.read") is None
    assert registry.from_wire_name("choir__nope") is None


def test_manifest_hash_is_stable_and_order_independent(root: Path) -> None:
    registry = load(root)
    tools = [tool for name in registry.names() if (tool := registry.get(name)) is not None]
    reordered = ToolRegistry({tool.name: tool for tool in reversed(tools)})

    assert registry.manifest_hash() == load(root).manifest_hash()
    assert reordered.manifest_hash() == registry.manifest_hash()
    assert registry.manifest_hash() == tool_manifest_hash(SEEDS.values())

    put(root, "agent", "demo.extra.json", manifest("demo.extra", "host"))
    assert load(root).manifest_hash() != registry.manifest_hash()


def test_secrets_are_scoped_to_the_tools_resource_kinds(root: Path) -> None:
    put(
        root,
        "agent",
        "demo.notes.json",
        manifest("demo.notes", "host", secret_resources=["notion"]),
    )
    registry = load(root)

    assert dict(registry.secrets_for("choir.exec", BOUND)) == {}
    assert dict(registry.secrets_for("demo.notes", BOUND)) == {
        "notion-personal-key": "notion-secret-value"
    }
    assert dict(registry.secrets_for("choir.email.send", BOUND)) == {
        "mail-password": "mail-secret-value"
    }
    assert dict(registry.secrets_for("choir.tts.speak", BOUND)) == {}


def test_scoped_secrets_never_show_their_values(root: Path) -> None:
    registry = load(root)

    secrets = registry.secrets_for("choir.notion.query", BOUND)

    assert repr(secrets) == "ToolSecrets(names=['notion-personal-key'])"
    assert "notion-secret-value" not in f"{secrets} {secrets!r} {[secrets]}"
    with pytest.raises(LookupError, match=r"no tool named 'demo\.unknown'"):
        registry.secrets_for("demo.unknown", BOUND)


def test_masked_results_show_only_status_summary_and_artifact(root: Path) -> None:
    put(root, "agent", "demo.private.json", manifest("demo.private", "host", prompt_mask=True))
    registry = load(root)
    result = ToolResult(
        status="success", summary="3 rows", data={"rows": [1, 2, 3]}, artifact_ref="sha:abc"
    )

    assert registry.result_for_prompt("demo.private", result) == {
        "status": "success",
        "summary": "3 rows",
        "artifact_ref": "sha:abc",
    }
    assert registry.result_for_prompt("choir.exec", result) == {
        "status": "success",
        "summary": "3 rows",
        "data": {"rows": [1, 2, 3]},
        "truncated": False,
        "artifact_ref": "sha:abc",
    }


async def test_a_registered_external_tool_runs_with_only_its_secrets(
    root: Path, tmp_path: Path
) -> None:
    put(root, "agent", "demo.echo.json", manifest("demo.echo", secret_resources=["notion"]))
    put_executable(root, "agent", "demo.echo")
    registry = load(root)
    tool = registry.get("demo.echo")
    assert tool is not None
    assert tool.executable is not None

    result = await run_external(
        tool.executable,
        {"mode": "echo"},
        secrets=registry.secrets_for("demo.echo", BOUND),
        workspace_root=tmp_path,
        timeout_ms=tool.manifest.runtime.timeout_ms,
    )

    assert result.status == "success"
    assert result.data["secrets"] == {"notion-personal-key": "notion-secret-value"}
