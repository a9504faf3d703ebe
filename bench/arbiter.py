"""Arbiter costs: per-call overhead of a no-op tool, commit throughput, parallel execution.

    python -m bench.arbiter [--json] [--quick]

- `tool_call_overhead_p50_us` / `_p99_us`: one proposal of a no-op tool (a lane-hook tool with a
  `file:{path}:S` lock) through queue, validation, lockset, intent, execution and result commits.
- `commits_per_s` and `commit_p99_us`: `CommitLog.append` (canonical JSON + hash chain).
- `..._with_secrets`: the same with eight session secrets registered, so every commit is also
  scanned for them (the redaction of tool output, `choir.logs.redaction`).
- `parallel_8_files_ratio`: 8 core jobs each running one 50 ms tool on its own file, divided by
  the time of one such job alone (goal ≤ 1.3).
"""

from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench.common import parse_args, percentile, report
from choir.agent.kernel.commitlog import CommitLog
from choir.agent.kernel.proposal import ToolProposal
from choir.agent.wiring import Kernel, open_kernel
from choir.config import Budgets
from choir.core.budgets import BudgetLimits
from choir.logs.redaction import replace_secrets
from choir.protocol import ToolResult, ToolResultCommitted
from choir.protocol.log.committed import event_json

SEEDS = Path(__file__).resolve().parents[1] / "seeds" / "global"
SECRETS = [f"bench-secret-{n}-{'x' * (8 + n)}" for n in range(8)]
GOALS = {
    "tool_call_overhead_p50_us": "goal ≤ 100",
    "tool_call_overhead_with_secrets_p50_us": "goal ≤ 100",
    "commits_per_s": "goal ≥ 200,000",
    "commit_p99_us": "goal ≤ 20",
    "parallel_8_files_ratio": "goal ≤ 1.3",
}


def _manifest(name: str, mode: str) -> dict[str, Any]:
    return {
        "llm": {
            "name": name,
            "description": "Benchmark tool.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
            },
        },
        "runtime": {
            "implementation": "builtin",
            "locks": [{"resource": "file:{path}", "mode": mode}],
            "side_effect": "read" if mode == "S" else "write",
            "idempotent": True,
        },
    }


def _root(tmp: Path) -> Path:
    root = tmp / "choir"
    shutil.copytree(SEEDS / "tools", root / "tools" / "global")
    agent = root / "tools" / "agent"
    agent.mkdir()
    (agent / "bench.noop.json").write_text(json.dumps(_manifest("bench.noop", "S")))
    (agent / "bench.sleep.json").write_text(json.dumps(_manifest("bench.sleep", "X")))
    return root


async def _noop(proposal: ToolProposal, arguments: dict[str, Any]) -> ToolResult:
    return ToolResult.ok("done")


async def _sleep(proposal: ToolProposal, arguments: dict[str, Any]) -> ToolResult:
    await asyncio.sleep(0.05)
    return ToolResult.ok("slept")


async def _overhead(kernel: Kernel, calls: int, prefix: str = "noop") -> list[float]:
    samples = []
    for i in range(calls):
        proposal = ToolProposal("edge", f"{prefix}-{i}", "bench.noop", {"path": "a.txt"})
        started = time.perf_counter()
        await kernel.arbiter.propose(proposal)
        samples.append((time.perf_counter() - started) * 1e6)
    return samples


async def _jobs(kernel: Kernel, count: int, round_: int) -> float:
    names = [f"job-{round_}-{i}" for i in range(count)]
    for name in names:
        kernel.arbiter.policy.start_job(name)
    started = time.perf_counter()
    await asyncio.gather(
        *(
            kernel.arbiter.propose(
                ToolProposal(f"core:{n}", f"{n}-sleep", "bench.sleep", {"path": f"{n}.txt"})
            )
            for n in names
        )
    )
    elapsed = time.perf_counter() - started
    for name in names:
        kernel.arbiter.policy.end_job(name)
    return elapsed


def _commits(count: int) -> tuple[float, float]:
    log = CommitLog()
    event = event_json(
        ToolResultCommitted(call_id="c", tool="choir.fs.read", result=ToolResult.ok("read 3 lines"))
    )
    samples = []
    started = time.perf_counter()
    for _ in range(count):
        t0 = time.perf_counter()
        log.append("edge", event)
        samples.append(time.perf_counter() - t0)
    total = time.perf_counter() - started
    return count / total, percentile(samples, 99) * 1e6


async def main_async(quick: bool) -> dict[str, float]:
    limits = BudgetLimits(
        **{**Budgets().model_dump(), "max_tool_calls_per_session": 10**9, "max_core_jobs": 10**6}
    )
    hooks = {"bench.noop": _noop, "bench.sleep": _sleep}
    with tempfile.TemporaryDirectory() as tmp:
        workspace = Path(tmp) / "ws"
        workspace.mkdir()
        async with open_kernel(
            _root(Path(tmp)),
            workspace,
            limits=limits,
            lane_hooks=hooks,
            runtime_tools=_unimplemented(),
        ) as kernel:
            await _overhead(kernel, 500, "warm")
            samples = await _overhead(kernel, 2_000 if quick else 20_000)
            with _secrets_registered():
                secret_samples = await _overhead(kernel, 2_000 if quick else 20_000, "secret")
            one = min([await _jobs(kernel, 1, r) for r in range(5)])
            eight = min([await _jobs(kernel, 8, 10 + r) for r in range(5)])
    commits_per_s, commit_p99 = _commits(50_000 if quick else 300_000)
    with _secrets_registered():
        secret_commits_per_s, _ = _commits(50_000 if quick else 300_000)
    return {
        "tool_call_overhead_p50_us": percentile(samples, 50),
        "tool_call_overhead_p99_us": percentile(samples, 99),
        "tool_call_overhead_with_secrets_p50_us": percentile(secret_samples, 50),
        "commits_per_s": commits_per_s,
        "commits_with_secrets_per_s": secret_commits_per_s,
        "commit_p99_us": commit_p99,
        "parallel_8_files_ratio": eight / one,
    }


@contextmanager
def _secrets_registered() -> Iterator[None]:
    replace_secrets(SECRETS)
    try:
        yield
    finally:
        replace_secrets([])


def _unimplemented() -> frozenset[str]:
    from choir.agent.tools.builtin import BUILTIN_TOOLS

    names = set()
    for path in (SEEDS / "tools").glob("*.json"):
        runtime = json.loads(path.read_text())["runtime"]
        if runtime["implementation"] == "builtin" and path.stem not in BUILTIN_TOOLS:
            names.add(path.stem)
    return frozenset(names)


def main() -> None:
    args = parse_args(__doc__ or "")
    figures = asyncio.run(main_async(args.quick))
    report("bench.arbiter", figures, GOALS, args.json)


if __name__ == "__main__":
    main()
