"""Pieces of the end-to-end scenario: a slow, lock-holding test tool and an agent launcher.

`test.slow_write` is an external tool under `tools/agent` of the `/choir`-like tree: it appends
one line to a file *first* (the side effect the scenario counts), then sleeps, and reports when
it started and ended so the test can measure that two core jobs really ran at the same time.
It takes `file:{path}` X, so two calls on different files may run in parallel and two on the
same file may not. Every run appends its pid to a file outside the workspace: a tool the
SIGKILLed agent left behind is stopped by the test, not left sleeping.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

from choir.daemon.app import ChoirDaemon
from tests.e2e_agent.launch import launch_agent
from tests.e2e_agent.test_agent_process import choir_root

SLOW_WRITE = """#!{python}
import json, os, sys, time
arguments = json.load(sys.stdin)["arguments"]
with open({pids!r}, "a") as pids:
    pids.write(f"{{os.getpid()}}\\n")
started = time.time()
with open(arguments["path"], "a") as target:
    target.write(arguments["text"] + "\\n")
time.sleep(arguments["sleep_ms"] / 1000)
summary = "wrote " + os.path.basename(arguments["path"])
print(json.dumps({{"status": "success", "summary": summary,
                  "data": {{"started": started, "ended": time.time()}}}}))
"""

SLOW_WRITE_MANIFEST: dict[str, Any] = {
    "llm": {
        "name": "test.slow_write",
        "description": "Append a line to a file, then pause (test tool).",
        "parameters": {
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "text": {"type": "string"},
                "sleep_ms": {"type": "integer", "minimum": 0},
            },
            "required": ["path", "text", "sleep_ms"],
            "additionalProperties": False,
        },
    },
    "runtime": {
        "implementation": "external",
        "exec_path": "/choir/tools/agent/test.slow_write",
        "timeout_ms": 120_000,
        "locks": [{"resource": "file:{path}", "mode": "X"}],
        "side_effect": "write",
        "idempotent": False,
    },
}


def scenario_tree(root: Path) -> Path:
    """The `/choir`-like tree with `test.slow_write` added (made once, reused by a restart)."""
    tree = root / "choir"
    if tree.exists():
        return tree
    choir_root(root)
    tools = tree / "tools" / "agent"
    (tools / "test.slow_write.json").write_text(json.dumps(SLOW_WRITE_MANIFEST))
    script = tools / "test.slow_write"
    script.write_text(SLOW_WRITE.format(python=sys.executable, pids=str(root / "tool-pids")))
    script.chmod(0o755)
    return tree


def stop_left_tools(root: Path) -> None:
    """Kill every `test.slow_write` process still alive (the crash leaves one sleeping)."""
    pids = root / "tool-pids"
    for line in pids.read_text().split() if pids.exists() else []:
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(line), signal.SIGKILL)


async def launch(daemon: ChoirDaemon, root: Path, name: str) -> asyncio.subprocess.Process:
    """`choir-agent` for agent-1's session, as choird would start it (a crashed one resumes)."""
    tree = scenario_tree(root)
    launched = await launch_agent(daemon, root, tree=tree, workspace=root / "ws", log_name=name)
    return launched.process


def lines(path: Path) -> list[str]:
    """The lines of `path`; none when it does not exist."""
    return path.read_text().splitlines() if path.exists() else []
