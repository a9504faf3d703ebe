"""A budget reloaded by config (§7.6, §16.3) applies at the next check, for every budget.

A real kernel (arbiter, log, tools) and a real `DynamicState`: swapping in a config version with
lower budgets must refuse the next check of each kind — a lane already past the new limit
included — and report the lanes' fresh figures; an invalid one keeps the last valid budgets.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from choir.agent.lanes.budget_follow import BudgetFollower, Remaining
from choir.agent.replication.live_config import DynamicConfig, DynamicState
from choir.agent.wiring import Kernel, open_kernel
from choir.protocol import ModelOutput, Usage
from tests.agent.test_arbiter import UNIMPLEMENTED, call, limits, make_root


@dataclass
class Rig:
    kernel: Kernel
    state: DynamicState
    refreshed: list[dict[str, Mapping[str, int] | None]]
    """What each refresh saw for the lanes edge and core:job-a."""

    def reload(self, **budgets: int) -> None:
        version = self.state.current().version + 1
        self.state.swap_config(DynamicConfig.of(version, {"budgets": budgets}))

    async def read(self, lane: str = "core:job-a") -> str | None:
        """One fs.read by `lane`: None when it ran, else its refusal's summary."""
        result = await self.kernel.arbiter.propose(call(lane, "choir.fs.read", path="f"))
        return None if result.status == "success" else f"{result.error_code}: {result.summary}"


@pytest.fixture
async def rig(tmp_path: Path) -> AsyncIterator[Rig]:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "f").write_text("x\n")
    state = DynamicState()
    refreshed: list[dict[str, Mapping[str, int] | None]] = []

    def refresh(remaining: Remaining, force: bool) -> None:
        refreshed.append({lane: remaining(lane) for lane in ("edge", "core:job-a")})

    async with open_kernel(
        make_root(tmp_path), workspace, limits=limits(), runtime_tools=UNIMPLEMENTED
    ) as kernel:
        follower = BudgetFollower(state, kernel.log, kernel.arbiter, refresh)
        follower.start()
        assert kernel.arbiter.policy.start_job("job-a") is None
        try:
            yield Rig(kernel, state, refreshed)
        finally:
            follower.stop()


async def two_calls(rig: Rig) -> None:
    assert await rig.read() is None
    assert await rig.read() is None


async def two_steps(rig: Rig) -> None:
    assert rig.kernel.arbiter.policy.begin_step("core:job-a") is None
    assert rig.kernel.arbiter.policy.begin_step("core:job-a") is None


async def spend_tokens(rig: Rig) -> None:
    output = ModelOutput(lane="edge", model="demo", usage=Usage(total_tokens=150))
    rig.kernel.arbiter.commit("edge", output)


async def one_injection(rig: Rig) -> None:
    assert rig.kernel.arbiter.policy.charge_injection("job-a") is None


async def wait_a_little(rig: Rig) -> None:
    await asyncio.sleep(0.05)


async def refused_call(rig: Rig) -> str | None:
    return await rig.read()


async def refused_step(rig: Rig) -> str | None:
    return rig.kernel.arbiter.policy.begin_step("core:job-a")


async def refused_edge_step(rig: Rig) -> str | None:
    return rig.kernel.arbiter.policy.begin_step("edge")


async def refused_job(rig: Rig) -> str | None:
    return rig.kernel.arbiter.policy.start_job("job-b")


async def refused_injection(rig: Rig) -> str | None:
    return rig.kernel.arbiter.policy.charge_injection("job-a")


Step = Callable[[Rig], Any]

CASES: dict[str, tuple[Step, dict[str, int], Step]] = {
    # budget: (what the session did, the reloaded budgets, the check that must now refuse)
    "per_job_max_tool_calls": (two_calls, {"per_job_max_tool_calls": 1}, refused_call),
    "max_tool_calls_per_session": (two_calls, {"max_tool_calls_per_session": 2}, refused_call),
    "per_job_max_steps": (two_steps, {"per_job_max_steps": 1}, refused_step),
    "per_job_wall_time_ms": (wait_a_little, {"per_job_wall_time_ms": 10}, refused_call),
    "total_session_tokens": (spend_tokens, {"total_session_tokens": 100}, refused_edge_step),
    "max_core_jobs": (wait_a_little, {"max_core_jobs": 1}, refused_job),
    "max_injections_per_job": (one_injection, {"max_injections_per_job": 1}, refused_injection),
}


@pytest.mark.parametrize(("did", "budgets", "check"), CASES.values(), ids=CASES.keys())
async def test_a_lowered_budget_refuses_the_next_check(
    rig: Rig, did: Step, budgets: dict[str, int], check: Step, request: pytest.FixtureRequest
) -> None:
    name = request.node.callspec.id
    await did(rig)
    rig.reload(**budgets)
    refused = await check(rig)
    assert refused is not None
    assert name in refused
    assert getattr(rig.kernel.arbiter.policy.limits, name) == budgets[name]


async def test_a_raised_token_budget_lets_the_session_go_on(rig: Rig) -> None:
    await spend_tokens(rig)
    rig.reload(total_session_tokens=100)
    assert "total_session_tokens" in (rig.kernel.arbiter.policy.begin_step("edge") or "")
    rig.reload(total_session_tokens=1_000)
    assert rig.kernel.arbiter.policy.begin_step("edge") is None


async def test_a_reload_reports_the_new_figures_and_charges_report_theirs(rig: Rig) -> None:
    await two_calls(rig)
    await asyncio.sleep(0)  # the coalesced refresh after the charges
    charged = rig.refreshed[-1]
    assert charged["edge"] is not None
    assert charged["edge"]["max_tool_calls_per_session"] == 500 - 2
    assert charged["core:job-a"] is not None
    assert charged["core:job-a"]["per_job_max_tool_calls"] == 100 - 2
    rig.reload(per_job_max_tool_calls=5, max_tool_calls_per_session=10)
    reloaded = rig.refreshed[-1]
    assert reloaded["edge"] is not None
    assert reloaded["edge"]["max_tool_calls_per_session"] == 8
    assert reloaded["core:job-a"] is not None
    assert reloaded["core:job-a"]["per_job_max_tool_calls"] == 3


async def test_an_invalid_reload_keeps_the_last_valid_budgets(rig: Rig) -> None:
    rig.reload(per_job_max_tool_calls=2)
    rig.reload(per_job_max_tool_calls=0)
    rig.reload(no_such_budget=3)
    assert rig.kernel.arbiter.policy.limits.per_job_max_tool_calls == 2
    await two_calls(rig)
    assert "per_job_max_tool_calls" in (await rig.read() or "")
