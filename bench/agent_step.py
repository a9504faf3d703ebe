"""choir's own cost per LLM step of the edge lane, and how it grows with the session log.

    python -m bench.agent_step [--json] [--quick]

In-process: the real kernel (seed tools), `LaneKit`, `EdgeLane` and core jobs of choir-agent,
talking to a zero-latency `ScriptedModelServer` over loopback HTTP. Only choird is left out (the
status reports go to a sink): replication is asynchronous to the lanes and not on a step's path.

- `step_overhead_p50_ms`: one user message answered with one model call — from `submit` to the
  committed `AgentReplied` — minus the time spent inside `LlmClient.complete` (the model server
  and its HTTP round trip). What remains is choir: commits, working memory, prompt assembly,
  tool list, compaction measurement, state reports.
- `step_overhead_slope_ms_per_1k_events`: the p50 at a 100k-event session log minus the p50 at
  a 1k-event one, per 1,000 events. The log is pre-filled with finished core jobs' events (a
  long session's edge window stays small: compaction folds it), so this is what the log's size
  alone costs a step.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from bench.common import parse_args, percentile, report
from choir.adapters.llm.client import Completion, CompletionRequest, LlmClient, RateLimitNotice
from choir.agent.kernel.commitlog import CommitLog, LogEntry
from choir.agent.kernel.dispatch import LaneHook
from choir.agent.lanes.core.jobs import CoreJobTools
from choir.agent.lanes.core.runner import CoreJobRunner
from choir.agent.lanes.edge import EdgeLane
from choir.agent.lanes.support import DemoModel, Identity, LaneKit
from choir.agent.replication.control_plane import ControlPlane
from choir.agent.replication.live_config import DynamicConfig, DynamicState
from choir.agent.replication.status import StatusReporter
from choir.agent.wiring import open_kernel
from choir.config import Budgets
from choir.core.budgets import BudgetLimits
from choir.protocol import ModelOutput, ReportStatusRequest, UserMessagePush
from choir.protocol.log.committed import event_json
from choir.scripted import ReplyStep, Script, ScriptedModelServer

SEEDS = Path(__file__).resolve().parents[1] / "seeds" / "global"
GOALS = {
    "step_overhead_p50_ms": "goal ≤ 5",
    "step_overhead_slope_ms_per_1k_events": "goal ≤ 0.05",
}
DELTA = '{"memory_delta": {"mode": "append", "summary_update": "More greetings."}}'
REPLY = Script(
    steps=[
        ReplyStep(match="Events to fold", repeat=True, text=DELTA),
        ReplyStep(repeat=True, text="ok"),
    ]
)


class TimedLlm(LlmClient):
    """The real client, keeping the wall time spent in the lanes' own calls (the ones offering
    tools; background compaction calls run beside the step and are not subtracted)."""

    spent_s = 0.0

    async def complete(
        self, request: CompletionRequest, *, on_rate_limited: RateLimitNotice | None = None
    ) -> Completion:
        started = time.perf_counter()
        try:
            return await super().complete(request, on_rate_limited=on_rate_limited)
        finally:
            if request.tools:
                self.spent_s += time.perf_counter() - started


class StatusSink:
    """Stands in for choird's REPORT_STATUS: the lanes' reports are advisory."""

    async def report_status(self, request: ReportStatusRequest) -> None:
        return None

    def on_connected(self, listener: Callable[[], None]) -> Callable[[], None]:
        return lambda: None  # never reconnects: nothing to resend


@dataclass
class Lanes:
    kit: LaneKit
    jobs: CoreJobRunner
    edge: EdgeLane
    llm: TimedLlm


def session_config(endpoint: str, **extra: Any) -> DynamicState:
    """A published config binding the scripted model at `endpoint`."""
    blob = {
        "bindings": {"workspace": "bench", "llm": "bench", "dm": "console"},
        "models": {"bench": {"provider": "scripted", "model": "bench", "endpoint": endpoint}},
        **extra,
    }
    return DynamicState(DynamicConfig.of(1, blob))


def choir_root(tmp: Path, manifests: Mapping[str, dict[str, Any]] | None = None) -> Path:
    """A `/choir` tree: the seed tools, and `manifests` as agent tools."""
    root = tmp / "choir"
    shutil.copytree(SEEDS / "tools", root / "tools" / "global")
    (root / "tools" / "agent").mkdir()
    for name, manifest in (manifests or {}).items():
        (root / "tools" / "agent" / f"{name}.json").write_text(json.dumps(manifest))
    return root


@contextlib.asynccontextmanager
async def open_lanes(
    tmp: Path,
    endpoint: str,
    *,
    log: CommitLog | None = None,
    hooks: Mapping[str, LaneHook] | None = None,
    manifests: Mapping[str, dict[str, Any]] | None = None,
) -> AsyncIterator[Lanes]:
    """choir-agent's lanes over a fresh kernel in `tmp`, as the runtime wires them."""
    from choir.agent.startup import LANE_TOOLS, runtime_tools
    from choir.core.integrations import NOT_IN_THIS_VERSION

    limits = BudgetLimits(
        **{
            **Budgets().model_dump(),
            "max_tool_calls_per_session": 10**9,
            "max_core_jobs": 10**6,
            "total_session_tokens": 10**12,
        }
    )
    table: dict[str, LaneHook] = dict(hooks or {})

    def late(name: str) -> LaneHook:
        async def hook(proposal: Any, arguments: dict[str, Any]) -> Any:
            return await table[name](proposal, arguments)

        return hook

    workspace = tmp / "ws"
    workspace.mkdir(exist_ok=True)
    lane_hooks = {**{name: late(name) for name in LANE_TOOLS}, **table}
    async with (
        TimedLlm() as llm,
        open_kernel(
            choir_root(tmp, manifests),
            workspace,
            limits=limits,
            lane_hooks=lane_hooks,
            runtime_tools=runtime_tools(),
            unavailable=NOT_IN_THIS_VERSION,
            log=log,
        ) as kernel,
    ):
        status = StatusReporter(cast(ControlPlane, StatusSink()))
        # a full run's 400 steps of ~7.4k prompt tokens each pass the default 2M session budget
        # at the 271st: that step's reply was a budget refusal, and the bench stopped there
        config = session_config(endpoint, budgets={"total_session_tokens": 100_000_000})
        kit = LaneKit(kernel, llm, config, DemoModel(), Identity(), status)
        kit.start()
        jobs = CoreJobRunner(kit)
        tools = CoreJobTools(kit, jobs)
        table.update(tools.hooks())
        table["choir.memory.compact"] = kit.compaction.hook
        kernel.arbiter.add_gate(tools.gate)
        edge = EdgeLane(kit, jobs)
        try:
            yield Lanes(kit, jobs, edge, llm)
        finally:
            await kit.compaction.close()
            await status.close()
            kit.stop()


def prefilled(events: int) -> CommitLog:
    """A session log of `events` events of finished core jobs (outside edge's window)."""
    log = CommitLog()
    output = event_json(ModelOutput(lane="core:old", text="worked on it", model="bench"))
    for n in range(events):
        log.append(f"core:old-{n % 100}", output)
    return log


async def step_overheads(endpoint: str, log_events: int, steps: int) -> list[float]:
    """The choir-side milliseconds of `steps` edge cycles at a `log_events`-event log."""
    with tempfile.TemporaryDirectory() as tmp:
        async with open_lanes(Path(tmp), endpoint, log=prefilled(log_events)) as lanes:
            runner = asyncio.create_task(lanes.edge.run())
            try:
                return [await _one_step(lanes, n) for n in range(steps)]
            finally:
                runner.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await runner


async def _one_step(lanes: Lanes, n: int) -> float:
    replied: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def on_commit(entry: LogEntry) -> None:
        if entry.kind == "agent_replied" and not replied.done():
            replied.set_result(None)

    unsubscribe = lanes.kit.kernel.log.subscribe(on_commit)
    spent_before = lanes.llm.spent_s
    started = time.perf_counter()
    lanes.edge.submit(UserMessagePush(message_id=f"m{n}", text=f"hello {n}"))
    await replied
    wall = time.perf_counter() - started
    unsubscribe()
    if lanes.llm.spent_s == spent_before:
        raise RuntimeError("the step made no model call: check the bench's model binding")
    return (wall - (lanes.llm.spent_s - spent_before)) * 1000


async def main_async(quick: bool) -> dict[str, float]:
    steps = 100 if quick else 400
    async with ScriptedModelServer(REPLY, zero_latency=True) as server:
        await step_overheads(server.url, 1_000, 30)  # warm up
        small = await step_overheads(server.url, 1_000, steps)
        large = await step_overheads(server.url, 100_000, steps)
    small_p50, large_p50 = percentile(small, 50), percentile(large, 50)
    return {
        "step_overhead_p50_ms": small_p50,
        "step_overhead_p99_ms": percentile(small, 99),
        "step_overhead_p50_at_100k_ms": large_p50,
        "step_overhead_slope_ms_per_1k_events": (large_p50 - small_p50) / 99,
    }


def main() -> None:
    args = parse_args(__doc__ or "")
    report("bench.agent_step", asyncio.run(main_async(args.quick)), GOALS, args.json)


if __name__ == "__main__":
    main()
