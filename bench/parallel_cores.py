"""Two core jobs at once: parallel on different files, serialized on the same one (§9, §7.4).

    python -m bench.parallel_cores [--json] [--quick]

The real lanes of `bench.agent_step` (kernel, core jobs, zero-latency scripted model): edge
spawns the jobs through the arbiter; each job's model calls one ~200 ms write tool (a lane-hook
tool holding `file:{path}` exclusively), then answers. The figure is the wall time from the
first spawn to the last `CoreStopped`, relative to one such job alone:

- `different_files_ratio`: two jobs, two files — the locks do not conflict (goal ≤ 1.3).
- `same_file_ratio`: two jobs, one file — the second waits for the first (goal ≥ 1.7).
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any, Final

from bench.agent_step import open_lanes
from bench.common import median, parse_args, report
from choir.agent.kernel.commitlog import LogEntry
from choir.agent.kernel.proposal import ToolProposal
from choir.protocol import ToolResult
from choir.scripted import ReplyStep, Script, ScriptedCall, ScriptedModelServer, ToolCallsStep

GOALS = {"different_files_ratio": "goal ≤ 1.3", "same_file_ratio": "goal ≥ 1.7"}
WRITE_S: Final = 0.2
"""How long the write tool takes."""
SLOW_WRITE: Final = {
    "llm": {
        "name": "bench.slow_write",
        "description": "Write a file slowly.",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
        },
    },
    "runtime": {
        "implementation": "builtin",
        "locks": [{"resource": "file:{path}", "mode": "X"}],
        "side_effect": "write",
        "idempotent": True,
    },
}


async def _slow_write(proposal: ToolProposal, arguments: dict[str, Any]) -> ToolResult:
    await asyncio.sleep(WRITE_S)
    return ToolResult.ok(f"wrote {arguments['path']}")


def _script(paths: list[str]) -> Script:
    """Each job's first request takes the next write (unconditioned steps play in order)."""
    writes = [
        ToolCallsStep(calls=[ScriptedCall(name="bench.slow_write", arguments={"path": path})])
        for path in paths
    ]
    return Script(steps=[ReplyStep(after="tool", repeat=True, text="written"), *writes])


async def _round(paths: list[str]) -> float:
    """Seconds from the first spawn to the last job's end, one job per path."""
    async with ScriptedModelServer(_script(paths), zero_latency=True) as server:
        with tempfile.TemporaryDirectory() as tmp:
            manifests = {"bench.slow_write": SLOW_WRITE}
            hooks = {"bench.slow_write": _slow_write}
            async with open_lanes(Path(tmp), server.url, hooks=hooks, manifests=manifests) as lanes:
                arbiter, done = lanes.kit.kernel.arbiter, asyncio.Event()
                stopped: list[LogEntry] = []

                def on_commit(entry: LogEntry) -> None:
                    if entry.kind == "core_stopped":
                        stopped.append(entry)
                        if len(stopped) == len(paths):
                            done.set()

                lanes.kit.kernel.log.subscribe(on_commit)
                started = time.perf_counter()
                for n in range(len(paths)):
                    spawn = {"job_name": f"job-{n}", "task_spec": "Write the file."}
                    await arbiter.propose(ToolProposal("edge", f"s{n}", "choir.core.spawn", spawn))
                await done.wait()
                return time.perf_counter() - started


async def main_async(quick: bool) -> dict[str, float]:
    rounds = 3 if quick else 7
    one = median([await _round(["a.txt"]) for _ in range(rounds)])
    different = median([await _round(["a.txt", "b.txt"]) for _ in range(rounds)])
    same = median([await _round(["a.txt", "a.txt"]) for _ in range(rounds)])
    return {
        "one_job_s": one,
        "different_files_ratio": different / one,
        "same_file_ratio": same / one,
    }


def main() -> None:
    args = parse_args(__doc__ or "")
    report("bench.parallel_cores", asyncio.run(main_async(args.quick)), GOALS, args.json)


if __name__ == "__main__":
    main()
