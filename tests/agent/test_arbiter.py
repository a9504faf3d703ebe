"""The arbiter against a real /choir tree, real workspace, real subprocesses and real locks.

Covers: the commit sequence and hash chain, every refusal path (unknown tool, lane exposure,
schema, paths, skill allowlist, budgets, gates), idempotent re-proposal, concurrent executions
under the lock manager (different files in parallel, the same file serialized, a slow tool never
blocking the other lane), cancellation and timeouts leaving locks and log consistent.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from choir.agent.kernel.commitlog import LogEntry
from choir.agent.kernel.intents import IntentNotDurable
from choir.agent.kernel.proposal import ToolProposal
from choir.agent.wiring import Kernel, open_kernel
from choir.config import Budgets
from choir.core.budgets import BudgetLimits
from choir.protocol import ModelOutput, ToolCallCommitted, ToolResult, Usage
from choir.protocol.log.committed import event_json

SEEDS = Path(__file__).parents[2] / "seeds" / "global"
UNIMPLEMENTED = frozenset(
    {
        "choir.core.spawn",
        "choir.core.inject",
        "choir.core.cancel",
        "choir.core.list",
        "choir.core.report",
        "choir.memory.compact",
        "choir.email.send",
        "choir.email.receive",
        "choir.email.check",
        "choir.notion.query",
        "choir.tts.speak",
        "choir.web.search",
    }
)

SLOW_WRITE = """#!/usr/bin/env python3
import json, sys, time
request = json.load(sys.stdin)
args = request["arguments"]
time.sleep(args.get("sleep_ms", 0) / 1000)
with open(args["path"], "a") as f:
    f.write(args.get("text", "x") + "\\n")
print(json.dumps({"status": "success", "summary": "wrote " + args["path"]}))
"""

SLOW_WRITE_MANIFEST = {
    "llm": {
        "name": "test.slow_write",
        "description": "Append a line to a file after a pause (test tool).",
        "parameters": {
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "text": {"type": "string"},
                "sleep_ms": {"type": "integer", "minimum": 0},
            },
            "required": ["path"],
            "additionalProperties": False,
        },
    },
    "runtime": {
        "implementation": "external",
        "exec_path": "/choir/tools/agent/test.slow_write",
        "timeout_ms": 2000,
        "locks": [{"resource": "file:{path}", "mode": "X"}],
        "side_effect": "write",
        "idempotent": False,
    },
}

SKILL = {
    "name": "readonly-review",
    "description": "Read, then report.",
    "initial_state": "read",
    "states": {
        "read": {
            "objective": "Read the files.",
            "allowed_tools": ["choir.fs.read"],
            "transitions": [{"on": "complete", "to": "done"}],
        },
        "done": {"terminal": True},
    },
    "max_steps": 10,
    "interruptible": True,
}


def make_root(tmp_path: Path) -> Path:
    root = tmp_path / "choir"
    shutil.copytree(SEEDS / "tools", root / "tools" / "global")
    agent_tools = root / "tools" / "agent"
    agent_tools.mkdir(parents=True)
    (agent_tools / "test.slow_write.json").write_text(json.dumps(SLOW_WRITE_MANIFEST))
    script = agent_tools / "test.slow_write"
    script.write_text(SLOW_WRITE)
    script.chmod(0o755)
    (root / "skills").mkdir()
    (root / "skills" / "readonly-review.json").write_text(json.dumps(SKILL))
    return root


def limits(**overrides: int) -> BudgetLimits:
    return BudgetLimits(**{**Budgets().model_dump(), **overrides})


@pytest.fixture
async def kernel(tmp_path: Path) -> AsyncIterator[Kernel]:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "notes.txt").write_text("one\ntwo\nthree\n")
    async with open_kernel(
        make_root(tmp_path), workspace, limits=limits(), runtime_tools=UNIMPLEMENTED
    ) as k:
        for job in JOBS:
            assert k.arbiter.policy.start_job(job) is None
        yield k


_ids = iter(range(1_000_000))
JOBS = ("job-a", "job-b", "refactor-auth", "write-tests", "review", "warm")


def call(lane: str, tool: str, **arguments: Any) -> ToolProposal:
    return ToolProposal(lane=lane, call_id=f"call-{next(_ids)}", tool=tool, arguments=arguments)


async def until_held(kernel: Kernel, lane: str, within: float = 10.0) -> None:
    """Until `lane` holds a lock: the call it proposed is past its lock wait and running.

    A fixed sleep guessed that the proposing task had run by then; under parallel test load it
    sometimes had not, and the next call took the lock first."""
    async with asyncio.timeout(within):
        while not kernel.locks.holders_of(lane):  # noqa: ASYNC110 - the lock table has no event
            await asyncio.sleep(0.005)


async def until_waiting(kernel: Kernel, count: int = 1, within: float = 10.0) -> None:
    """Until `count` lock requests are queued."""
    async with asyncio.timeout(within):
        while kernel.locks.waiting < count:  # noqa: ASYNC110 - the lock table has no event
            await asyncio.sleep(0.005)


def kinds(k: Kernel) -> list[str]:
    return [entry.kind for entry in k.log]


async def test_a_call_commits_request_intent_and_result_on_a_valid_chain(kernel: Kernel) -> None:
    k = kernel
    result = await k.arbiter.propose(call("edge", "choir.fs.read", path="notes.txt"))
    assert result.status == "success"
    assert "two" in json.dumps(result.data)
    assert kinds(k) == ["tool_call_requested", "tool_call_committed", "tool_result_committed"]
    intent = ToolCallCommitted.model_validate(k.log.entry(2).event)
    assert [(lock.resource, lock.mode) for lock in intent.locks] == [("file:notes.txt", "S")]
    k.log.verify()
    assert k.locks.idle


@pytest.mark.parametrize(
    ("lane", "tool", "arguments", "code"),
    [
        ("edge", "choir.fs.nope", {}, "unknown_tool"),
        ("core:job-a", "choir.core.spawn", {}, "tool_not_exposed"),
        ("edge", "choir.fs.read", {"path": 7}, "invalid_input"),
        ("edge", "choir.fs.read", {}, "invalid_input"),
        ("edge", "choir.fs.read", {"path": "../outside"}, "path_outside_workspace"),
        ("edge", "choir.fs.read", {"path": "/etc/passwd"}, "path_outside_workspace"),
        ("core:job-a", "choir.web.browse", {"url": "http://127.0.0.1/"}, "host_unavailable"),
        ("edge", "choir.web.search", {"query": "x"}, "not_implemented"),
    ],
)
async def test_refusals_are_structured_results_and_take_no_lock(
    kernel: Kernel, lane: str, tool: str, arguments: dict[str, Any], code: str
) -> None:
    result = await kernel.arbiter.propose(call(lane, tool, **arguments))
    assert result.status == "error"
    assert result.error_code == code, result
    assert kernel.locks.idle
    assert "tool_call_committed" not in kinds(kernel) or code in {
        "host_unavailable",
        "not_implemented",
    }
    assert str(kernel.workspace.root) not in result.model_dump_json()
    kernel.log.verify()


async def test_unknown_tool_lists_what_the_lane_may_use(kernel: Kernel) -> None:
    result = await kernel.arbiter.propose(call("edge", "choir.fs.raed", path="x"))
    assert "choir.fs.read" in result.data["known_tools"]


async def test_re_proposing_a_committed_invocation_never_executes_twice(kernel: Kernel) -> None:
    proposal = call("core:job-a", "test.slow_write", path="log.txt", text="once")
    first = await kernel.arbiter.propose(proposal)
    again = await kernel.arbiter.propose(proposal)
    assert first == again
    assert (kernel.workspace.root / "log.txt").read_text() == "once\n"
    assert kinds(kernel).count("tool_call_committed") == 1


async def test_concurrent_re_proposals_join_the_call_in_flight(kernel: Kernel) -> None:
    proposal = call("core:job-a", "test.slow_write", path="log.txt", text="joined", sleep_ms=100)
    a, b = await asyncio.gather(kernel.arbiter.propose(proposal), kernel.arbiter.propose(proposal))
    assert a == b
    assert (kernel.workspace.root / "log.txt").read_text() == "joined\n"


async def _timed(kernel: Kernel, *proposals: ToolProposal) -> tuple[float, list[ToolResult]]:
    started = time.monotonic()
    results = await asyncio.gather(*(kernel.arbiter.propose(p) for p in proposals))
    return time.monotonic() - started, list(results)


async def test_two_cores_on_different_files_run_in_parallel(kernel: Kernel) -> None:
    await _timed(kernel, call("core:warm", "test.slow_write", path="warm.txt"))  # python startup
    elapsed, results = await _timed(
        kernel,
        call("core:refactor-auth", "test.slow_write", path="auth.py", sleep_ms=400),
        call("core:write-tests", "test.slow_write", path="auth_test.py", sleep_ms=400),
    )
    assert all(r.status == "success" for r in results)
    assert elapsed < 0.75, f"different files should overlap, took {elapsed:.2f}s"


async def test_two_cores_on_the_same_file_serialize(kernel: Kernel) -> None:
    elapsed, results = await _timed(
        kernel,
        call("core:refactor-auth", "test.slow_write", path="auth.py", sleep_ms=300, text="a"),
        call("core:write-tests", "test.slow_write", path="auth.py", sleep_ms=300, text="b"),
    )
    assert all(r.status == "success" for r in results)
    assert elapsed >= 0.6
    assert sorted((kernel.workspace.root / "auth.py").read_text().split()) == ["a", "b"]


async def test_a_slow_tool_never_blocks_the_other_lanes_unrelated_tool(kernel: Kernel) -> None:
    slow = asyncio.create_task(
        kernel.arbiter.propose(call("core:job-a", "test.slow_write", path="a.txt", sleep_ms=800))
    )
    await until_held(kernel, "core:job-a")
    started = time.monotonic()
    read = await kernel.arbiter.propose(call("edge", "choir.fs.read", path="notes.txt"))
    assert read.status == "success"
    assert time.monotonic() - started < 0.3
    assert not slow.done()
    assert (await slow).status == "success"


async def test_exec_waits_for_file_writers_and_holds_the_workspace(kernel: Kernel) -> None:
    writer = asyncio.create_task(
        kernel.arbiter.propose(call("core:job-a", "test.slow_write", path="a.txt", sleep_ms=400))
    )
    await until_held(kernel, "core:job-a")
    result = await kernel.arbiter.propose(call("core:job-b", "choir.exec", command="cat a.txt"))
    assert writer.done()
    assert result.status == "success"
    assert "x" in json.dumps(result.data)


async def test_cancelling_the_proposer_kills_the_tool_and_commits_cancelled(kernel: Kernel) -> None:
    proposal = call("core:job-a", "choir.exec", command="sleep 30", timeout_ms=60000)
    task = asyncio.create_task(kernel.arbiter.propose(proposal))
    await asyncio.sleep(0.3)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert kernel.arbiter.committed_result(proposal.call_id) is not None
    assert kernel.arbiter.committed_result(proposal.call_id).status == "cancelled"  # type: ignore[union-attr]
    assert kernel.locks.idle
    assert kinds(kernel)[-1] == "tool_result_committed"
    kernel.log.verify()


async def test_a_timed_out_tool_reports_timeout_and_releases(kernel: Kernel) -> None:
    result = await kernel.arbiter.propose(
        call("core:job-a", "test.slow_write", path="t.txt", sleep_ms=5000)
    )
    assert result.status == "timeout"
    assert kernel.locks.idle


async def test_budget_of_tool_calls_is_enforced_per_job(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "f").write_text("x\n")
    async with open_kernel(
        make_root(tmp_path),
        workspace,
        limits=limits(per_job_max_tool_calls=2),
        runtime_tools=UNIMPLEMENTED,
    ) as k:
        k.arbiter.policy.start_job("job-a")
        k.arbiter.policy.start_job("job-b")
        results = [
            await k.arbiter.propose(call("core:job-a", "choir.fs.read", path="f")) for _ in range(3)
        ]
        assert [r.status for r in results] == ["success", "success", "error"]
        assert results[2].error_code == "budget_exceeded"
        other = await k.arbiter.propose(call("core:job-b", "choir.fs.read", path="f"))
        assert other.status == "success"


async def test_skill_allowlist_is_enforced_and_transitions_are_committed(kernel: Kernel) -> None:
    started = await kernel.arbiter.propose(
        call("core:review", "choir.skill.start", skill="readonly-review")
    )
    assert started.status == "success", started
    refused = await kernel.arbiter.propose(call("core:review", "choir.exec", command="ls"))
    assert refused.status == "error"
    assert refused.data["allowed_tools"] == ["choir.fs.read", "choir.skill.transition"]
    assert "choir.exec" not in [
        e.event.get("tool") for e in kernel.log if e.kind == "tool_call_committed"
    ]
    ok = await kernel.arbiter.propose(call("core:review", "choir.fs.read", path="notes.txt"))
    assert ok.status == "success"
    done = await kernel.arbiter.propose(
        call("core:review", "choir.skill.transition", on="complete")
    )
    assert done.status == "success"
    transitions = [e.event for e in kernel.log if e.kind == "skill_transition_committed"]
    assert [(t["from"], t["to"]) for t in transitions] == [(None, "read"), ("read", "done")]
    run = kernel.arbiter.policy.skill_runs["core:review"]
    assert run is not None
    assert run.outcome == "completed"


async def test_a_gate_refuses_before_anything_runs(kernel: Kernel) -> None:
    def edge_read_only(lane: str, tool: Any, arguments: Any) -> ToolResult | None:
        if lane == "edge" and tool.manifest.runtime.side_effect not in ("none", "read"):
            return ToolResult.fail("read_only", "edge is read-only while cores run")
        return None

    kernel.arbiter.add_gate(edge_read_only)
    result = await kernel.arbiter.propose(call("edge", "choir.exec", command="touch x"))
    assert result.error_code == "read_only"
    assert not (kernel.workspace.root / "x").exists()


async def test_unresolved_intents_are_found_after_a_restore(kernel: Kernel) -> None:
    await kernel.arbiter.propose(call("edge", "choir.fs.read", path="notes.txt"))
    assert kernel.arbiter.unresolved_intents() == []
    kernel.log.commit(
        "core:job-a",
        ToolCallCommitted(
            call_id="lost", tool="test.slow_write", locks=[], side_effect="write", idempotent=False
        ),
    )
    assert [e.event["call_id"] for e in kernel.arbiter.unresolved_intents()] == ["lost"]


async def test_a_restored_log_answers_old_invocations_without_running_them(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    root = make_root(tmp_path)
    proposal = call("core:job-a", "test.slow_write", path="once.txt", text="first")
    async with open_kernel(root, workspace, limits=limits(), runtime_tools=UNIMPLEMENTED) as k1:
        k1.arbiter.policy.start_job("job-a")
        first = await k1.arbiter.propose(proposal)
        saved = list(k1.log)
    from choir.agent.kernel.commitlog import CommitLog

    restored = CommitLog.restore(saved)
    async with open_kernel(
        root, workspace, limits=limits(), runtime_tools=UNIMPLEMENTED, log=restored
    ) as k2:
        k2.arbiter.policy.start_job("job-a")
        assert await k2.arbiter.propose(proposal) == first
    assert (workspace / "once.txt").read_text() == "first\n"


async def test_ending_a_job_cancels_its_call_waiting_for_locks(kernel: Kernel) -> None:
    holder = asyncio.create_task(
        kernel.arbiter.propose(call("core:job-a", "test.slow_write", path="a.txt", sleep_ms=400))
    )
    await until_held(kernel, "core:job-a")
    waiting = asyncio.create_task(
        kernel.arbiter.propose(call("core:job-b", "test.slow_write", path="a.txt"))
    )
    await until_waiting(kernel)
    kernel.arbiter.policy.end_job("job-b")
    assert (await waiting).status == "cancelled"
    assert (await holder).status == "success"
    assert kernel.locks.idle
    kernel.log.verify()


async def test_hot_path_events_are_exactly_the_models_json_form(kernel: Kernel) -> None:
    await kernel.arbiter.propose(call("core:job-a", "choir.fs.read", path="notes.txt"))
    await kernel.arbiter.propose(call("edge", "choir.fs.read", path="../x"))
    assert len(kernel.log) == 5
    for entry in kernel.log:
        assert event_json(entry.model()) == entry.event


async def test_lane_hooks_implement_lane_tools_such_as_memory_compact(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    asked: list[str] = []

    async def compact(proposal: ToolProposal, arguments: dict[str, Any]) -> ToolResult:
        asked.append(proposal.lane)
        return ToolResult.ok("compaction started")

    async with open_kernel(
        make_root(tmp_path),
        workspace,
        limits=limits(),
        lane_hooks={"choir.memory.compact": compact},
        runtime_tools=UNIMPLEMENTED - {"choir.memory.compact"},
    ) as k:
        result = await k.arbiter.propose(call("edge", "choir.memory.compact"))
    assert result.summary == "compaction started"
    assert asked == ["edge"]


async def test_a_side_effect_whose_intent_is_not_durable_never_runs(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    durable: list[int] = []

    async def choird_away(entry: LogEntry) -> None:
        raise IntentNotDurable("choird did not acknowledge the intent within 5 s")

    async def choird_here(entry: LogEntry) -> None:
        durable.append(entry.rev)

    root = make_root(tmp_path)
    async with open_kernel(
        root, workspace, limits=limits(), runtime_tools=UNIMPLEMENTED, intent_sink=choird_away
    ) as k:
        k.arbiter.policy.start_job("job-a")
        result = await k.arbiter.propose(call("core:job-a", "test.slow_write", path="x.txt"))
        assert result.error_code == "intent_not_durable"
        assert not (workspace / "x.txt").exists()
        assert k.locks.idle
        read = await k.arbiter.propose(call("core:job-a", "choir.fs.read", path="x.txt"))
        assert read.error_code == "not_found"  # idempotent reads need no durable intent
    async with open_kernel(
        root, workspace, limits=limits(), runtime_tools=UNIMPLEMENTED, intent_sink=choird_here
    ) as k:
        k.arbiter.policy.start_job("job-a")
        result = await k.arbiter.propose(call("core:job-a", "test.slow_write", path="x.txt"))
        assert result.status == "success"
        intent = next(e for e in k.log if e.kind == "tool_call_committed")
        assert durable == [intent.rev]


async def test_an_overwrite_runs_without_a_durable_intent_and_an_append_waits_for_one(
    tmp_path: Path,
) -> None:
    """`choir.fs.write` is not idempotent, but its overwrite is (the same bytes again): only the
    calls that add to a file wait for choird to hold their intent, and the intent says which."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    asked: list[str] = []

    async def choird_away(entry: LogEntry) -> None:
        asked.append(entry.event["call_id"])
        raise IntentNotDurable("choird did not acknowledge the intent within 5 s")

    async with open_kernel(
        make_root(tmp_path),
        workspace,
        limits=limits(),
        runtime_tools=UNIMPLEMENTED,
        intent_sink=choird_away,
    ) as k:
        path = "notes/a.txt"
        whole = call("edge", "choir.fs.write", path=path, op="overwrite", content="one\n")
        more = call("edge", "choir.fs.write", path=path, op="append", content="two\n")
        assert (await k.arbiter.propose(whole)).status == "success"
        refused = await k.arbiter.propose(more)
        intents = {e.event["call_id"]: e.event for e in k.log if e.kind == "tool_call_committed"}

    assert refused.error_code == "intent_not_durable"
    assert (workspace / path).read_text() == "one\n"  # the append never ran
    assert asked == [more.call_id]
    assert intents[whole.call_id]["idempotent"] is True
    assert intents[more.call_id]["idempotent"] is False


async def test_a_skill_ends_after_max_steps_with_a_committed_transition(kernel: Kernel) -> None:
    lane = "core:review"
    await kernel.arbiter.propose(call(lane, "choir.skill.start", skill="readonly-review"))
    for _ in range(SKILL["max_steps"]):
        assert kernel.arbiter.policy.begin_step(lane) is None
        kernel.arbiter.commit(lane, ModelOutput(lane=lane, text="thinking", model="demo"))
    assert kernel.arbiter.policy.begin_step(lane) is None
    run = kernel.arbiter.policy.skill_runs[lane]
    assert run is not None
    assert run.outcome == "max_steps"
    last = [e.event for e in kernel.log if e.kind == "skill_transition_committed"][-1]
    assert last["on"] == "max_steps"


async def test_interrupting_ends_an_interruptible_skill(kernel: Kernel) -> None:
    lane = "core:review"
    await kernel.arbiter.propose(call(lane, "choir.skill.start", skill="readonly-review"))
    assert kernel.arbiter.policy.interrupt_skill(lane) is None
    run = kernel.arbiter.policy.skill_runs[lane]
    assert run is not None
    assert run.outcome == "interrupted"


async def test_step_budget_and_session_tokens_are_enforced(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    tight = limits(per_job_max_steps=2, total_session_tokens=100)
    async with open_kernel(
        make_root(tmp_path), workspace, limits=tight, runtime_tools=UNIMPLEMENTED
    ) as k:
        k.arbiter.policy.start_job("job-a")
        assert k.arbiter.policy.begin_step("core:job-a") is None
        assert k.arbiter.policy.begin_step("core:job-a") is None
        assert "per_job_max_steps" in (k.arbiter.policy.begin_step("core:job-a") or "")
        assert k.arbiter.policy.begin_step("edge") is None  # edge turns have no step budget
        k.arbiter.commit(
            "edge",
            ModelOutput(lane="edge", model="demo", usage=Usage(total_tokens=150)),
        )
        assert "total_session_tokens" in (k.arbiter.policy.begin_step("edge") or "")
        assert k.arbiter.policy.budgets.tokens == 150  # never reset


async def test_a_job_past_its_wall_time_gets_no_more_tools(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "f").write_text("x\n")
    async with open_kernel(
        make_root(tmp_path), workspace, limits=limits(), runtime_tools=UNIMPLEMENTED
    ) as k:
        k.arbiter.policy.start_job("job-a", time_budget_ms=50)
        assert (await k.arbiter.propose(call("core:job-a", "choir.fs.read", path="f"))).status == (
            "success"
        )
        await asyncio.sleep(0.1)
        late = await k.arbiter.propose(call("core:job-a", "choir.fs.read", path="f"))
        assert late.error_code == "budget_exceeded"
        assert "per_job_wall_time_ms" in late.summary
        assert "per_job_wall_time_ms" in (k.arbiter.policy.begin_step("core:job-a") or "")
