"""An external tool's path arguments are confined like the built-ins' before it runs (§8.8).

A real external tool from a manifest (`test.cat`, locking `file:{path}`) reads the file it is
given, relative to the workspace it runs in, and reports the path it received. The model asks
for paths that escape — through `..`, an absolute path, a symlink to a directory or a file
outside, an absolute symlink, a symlink loop, a `file:src/{name}` template whose value leads
out — and each call must be refused before the tool starts (nothing of the outside file
reaches the result, the tool's start is never recorded). A path inside the workspace reaches
the tool as where it really is: symlinks followed, `/workspace/` stripped.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from choir.agent.kernel.proposal import ToolProposal
from choir.agent.wiring import Kernel, open_kernel
from choir.config import Budgets
from choir.core.budgets import BudgetLimits

SEEDS = Path(__file__).parents[2] / "seeds" / "global"
SECRET = "outside-secret-3b9f"

CAT = """#!/usr/bin/env python3
import json, os, sys
arguments = json.load(sys.stdin)["arguments"]
with open(os.environ["HOME"] + "/../started", "a") as started:
    started.write(json.dumps(arguments) + "\\n")
path = arguments.get("path") or "src/" + arguments["name"]
with open(path) as file:
    content = file.read()
print(json.dumps({"status": "success", "summary": "read " + path,
                  "data": {"path": path, "content": content}}))
"""


def manifest(name: str, field: str, resource: str) -> dict[str, Any]:
    return {
        "llm": {
            "name": name,
            "description": "Read a file (test tool).",
            "parameters": {
                "type": "object",
                "properties": {field: {"type": "string"}},
                "required": [field],
                "additionalProperties": False,
            },
        },
        "runtime": {
            "implementation": "external",
            "exec_path": f"/choir/tools/agent/{name}",
            "timeout_ms": 10_000,
            "locks": [{"resource": resource, "mode": "S"}],
            "side_effect": "read",
            "idempotent": True,
        },
    }


def tree(tmp_path: Path) -> Path:
    root = tmp_path / "choir"
    shutil.copytree(SEEDS / "tools", root / "tools" / "global")
    agent = root / "tools" / "agent"
    agent.mkdir()
    for name, field, resource in (
        ("test.cat", "path", "file:{path}"),
        ("test.cat_src", "name", "file:src/{name}"),
    ):
        (agent / f"{name}.json").write_text(json.dumps(manifest(name, field, resource)))
        script = agent / name
        script.write_text(CAT)
        script.chmod(0o755)
    return root


@pytest.fixture
async def kernel(tmp_path: Path) -> AsyncIterator[Kernel]:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(SECRET)
    ws = tmp_path / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / "src" / "real.txt").write_text("inside\n")
    (ws / "notes.txt").write_text("notes\n")
    for name, target in {
        "out": "../outside",
        "out_file": str(outside / "secret.txt"),
        "etc": "/etc",
        "loop_a": "loop_b",
        "loop_b": "loop_a",
        "alias": "src/real.txt",
        "srcdir": "src",
        "src/leak": "../../outside/secret.txt",
    }.items():
        (ws / name).symlink_to(target)
    limits = BudgetLimits(**Budgets().model_dump())
    runtime = frozenset({"choir.core.spawn", "choir.core.inject", "choir.core.cancel"})
    runtime |= {"choir.core.list", "choir.core.report", "choir.memory.compact"}
    runtime |= {"choir.email.send", "choir.email.receive", "choir.email.check"}
    runtime |= {"choir.notion.query", "choir.tts.speak", "choir.web.search"}
    async with open_kernel(tree(tmp_path), ws, limits=limits, runtime_tools=runtime) as k:
        yield k


def started(kernel: Kernel) -> list[dict[str, Any]]:
    """Every argument object the tool started with (the tool appends it before reading)."""
    record = kernel.workspace.root.parent / "started"
    return [json.loads(line) for line in record.read_text().splitlines()] if record.exists() else []


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("test.cat", {"path": "../outside/secret.txt"}),
        ("test.cat", {"path": "src/../../outside/secret.txt"}),
        ("test.cat", {"path": "/tmp"}),
        ("test.cat", {"path": "/etc/hostname"}),
        ("test.cat", {"path": "/workspace/../outside/secret.txt"}),
        ("test.cat", {"path": "out/secret.txt"}),
        ("test.cat", {"path": "out_file"}),
        ("test.cat", {"path": "etc/hostname"}),
        ("test.cat", {"path": "loop_a"}),
        ("test.cat", {"path": "src/leak"}),
        ("test.cat", {"path": "srcdir/leak"}),
        ("test.cat", {"path": "notes.txt\u0000/../../outside/secret.txt"}),
        ("test.cat_src", {"name": "leak"}),
        ("test.cat_src", {"name": "../../outside/secret.txt"}),
    ],
)
async def test_an_escaping_path_is_refused_before_the_tool_runs(
    kernel: Kernel, tool: str, arguments: dict[str, Any]
) -> None:
    result = await kernel.arbiter.propose(ToolProposal("edge", "c-1", tool, arguments))
    assert result.status == "error"
    assert result.error_code in ("path_outside_workspace", "invalid_input"), result
    assert SECRET not in result.model_dump_json()
    assert str(kernel.workspace.root.parent) not in result.model_dump_json()
    assert started(kernel) == []
    assert kernel.locks.idle


@pytest.mark.parametrize(
    ("given", "received", "content"),
    [
        ("alias", "src/real.txt", "inside\n"),
        ("srcdir/real.txt", "src/real.txt", "inside\n"),
        ("/workspace/notes.txt", "notes.txt", "notes\n"),
        ("./src//real.txt", "src/real.txt", "inside\n"),
    ],
)
async def test_an_inside_path_reaches_the_tool_as_where_it_really_is(
    kernel: Kernel, given: str, received: str, content: str
) -> None:
    result = await kernel.arbiter.propose(ToolProposal("edge", "c-1", "test.cat", {"path": given}))
    assert result.status == "success", result
    assert result.data == {"path": received, "content": content}
    assert started(kernel) == [{"path": received}]
    [intent] = [e for e in kernel.log if e.kind == "tool_call_committed"]
    assert intent.event["locks"] == [{"resource": f"file:{received}", "mode": "S"}]
