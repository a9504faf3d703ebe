"""Telemetry end to end (issue 19, §22.1): per-tool p50/p95 and lock waits in `agent status`,
the metrics endpoint scraped over real HTTP, and the agent's log lines for a lock wait.

A real choird in the test process with `metrics.listen` on a free loopback port, the real
`choir-agent` in its own process, one scripted model. Edge spawns the core job `holder`, whose
`test.slow_write` holds `file:shared.txt` X for ~2 s; half a second later edge's
`choir.fs.read` of the same file (S) must wait for it (~1.5 s), then edge reads another file
and answers. Every figure is then checked where an operator reads it.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from choir.client import ChoirClient
from choir.home import ChoirHome
from choir.scripted import ReplyStep, Script, ScriptedCall, ScriptedModelServer, ToolCallsStep
from choir.store.postgres.target import ConnectParams
from tests.e2e_agent.scenario_support import launch, stop_left_tools
from tests.harness.chat import replies_until
from tests.harness.daemons import running_daemon
from tests.harness.homes import read_config, scripted_home, write_config
from tests.harness.processes import run_choirctl

pytestmark = pytest.mark.slow

HOLD_MS = 2000
"""How long the core job's write holds `file:shared.txt`."""

SCRIPT = Script(
    description="a core job holds a file; edge's write to it waits, then edge reads and answers",
    steps=[
        # edge
        ToolCallsStep(
            match="contend please",
            calls=[
                ScriptedCall(
                    name="choir.core.spawn",
                    arguments={"job_name": "holder", "task_spec": "Hold shared.txt."},
                )
            ],
        ),
        ToolCallsStep(
            after="tool",
            match="core job holder started",
            delay_ms=500,  # the job's write has the lock by then
            calls=[ScriptedCall(name="choir.fs.read", arguments={"path": "shared.txt"})],
        ),
        ToolCallsStep(
            after="tool",
            match="held-by-holder",
            calls=[ScriptedCall(name="choir.fs.read", arguments={"path": "notes.txt"})],
        ),
        ReplyStep(after="tool", match="alpha beta", text="All done."),
        # the core job: its first request has no user or tool message
        ReplyStep(after="tool", match="wrote shared.txt", text="held it"),
        ToolCallsStep(
            calls=[
                ScriptedCall(
                    name="test.slow_write",
                    arguments={"path": "shared.txt", "text": "held-by-holder", "sleep_ms": HOLD_MS},
                )
            ]
        ),
    ],
)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.fixture
def root(root: Path) -> Iterator[Path]:
    """The harness's `root` (a failed test's logs kept), the tools the agent left stopped."""
    yield root
    stop_left_tools(root)


@pytest.fixture
def script() -> Script:
    return SCRIPT


@pytest.fixture
def port() -> int:
    return free_port()


@pytest.fixture
def home(root: Path, pg_params: ConnectParams, model: ScriptedModelServer, port: int) -> ChoirHome:
    home = scripted_home(root, pg_params, model.url)
    data = read_config(home)
    data["metrics"] = {"listen": f"127.0.0.1:{port}"}
    write_config(home, data)
    (root / "ws").mkdir()
    (root / "ws" / "notes.txt").write_text("alpha beta gamma\n")
    return home


def samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """(sample name, labels) -> value of a scrape, parsed by prometheus_client's own parser."""
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(
    scraped: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str
) -> float:
    return scraped[(name, frozenset(labels.items()))]


async def test_agent_status_and_the_metrics_endpoint_show_tool_latency_and_lock_waits(
    home: ChoirHome, root: Path, port: int
) -> None:
    async with running_daemon(home) as daemon, await ChoirClient.connect(home) as operator:
        agent = await launch(daemon, root, "agent")
        try:
            began = time.monotonic()
            sent = await operator.chat_send("agent-1", "contend please")
            await replies_until(operator, sent.after_seq, "All done.")
            assert time.monotonic() - began >= HOLD_MS / 1000
            await asyncio.sleep(0.5)  # the last events reach choird within ~100 ms

            # agent status: per tool p50/p95, the lock wait edge's write had
            status = await operator.agent_status("agent-1")
            assert status.tools is not None
            assert status.lock_wait is not None
            tools = {tool.tool: tool for tool in status.tools}
            assert set(tools) == {
                "choir.core.spawn",
                "choir.fs.read",
                "test.slow_write",
            }
            calls = {name: (t.calls, t.failed) for name, t in tools.items()}
            assert calls == {
                "choir.core.spawn": (1, 0),
                "choir.fs.read": (2, 0),
                "test.slow_write": (1, 0),
            }
            held = tools["test.slow_write"]
            assert HOLD_MS <= held.p50_ms == held.p95_ms == held.max_ms < HOLD_MS + 3000
            assert held.lock_wait_ms < 500  # it took the free lock
            read = tools["choir.fs.read"]
            assert read.p95_ms < 1000  # its run, not its wait
            assert 1000 <= read.lock_wait_ms <= HOLD_MS + 500
            waits = status.lock_wait
            assert (waits.calls, waits.waited) == (4, 1)
            assert waits.max_ms == waits.total_ms == read.lock_wait_ms

            shown = await asyncio.to_thread(run_choirctl, home, "agent", "status", "agent-1")
            assert shown.returncode == 0, shown.stderr
            assert "lock wait  1 of 4 calls waited" in shown.stdout
            headers = ["TOOL", "CALLS", "FAILED", "P50", "P95", "MAX", "LOCK", "WAIT"]
            assert any(line.split() == headers for line in shown.stdout.splitlines())
            [row] = [line for line in shown.stdout.splitlines() if line.startswith("test.slow")]
            assert row.split()[:3] == ["test.slow_write", "1", "0"]

            # the metrics endpoint, over HTTP, parsed as Prometheus parses it
            async with httpx.AsyncClient() as http:
                answer = await http.get(f"http://127.0.0.1:{port}/metrics")
            assert answer.status_code == 200
            assert answer.headers["content-type"].startswith("text/plain")
            scraped = samples(answer.text)
            for tool, (count, _) in calls.items():
                labels = {"agent": "agent-1", "tool": tool, "status": "success"}
                assert value(scraped, "choir_tool_calls_total", **labels) == count
            duration = "choir_tool_call_duration_seconds_bucket"
            slow = {"agent": "agent-1", "tool": "test.slow_write"}
            assert value(scraped, duration, **slow, le="1.0") == 0
            assert value(scraped, duration, **slow, le="5.0") == 1
            wait = "choir_lock_wait_seconds"
            assert value(scraped, f"{wait}_count", agent="agent-1") == 4
            assert value(scraped, f"{wait}_bucket", agent="agent-1", le="0.5") == 3
            assert 1.0 <= value(scraped, f"{wait}_sum", agent="agent-1") <= 3.0
            assert value(scraped, "choir_lock_waits_total", agent="agent-1") == 1
            assert value(scraped, "choir_heartbeats_total", agent="agent-1") >= 1
            events = value(scraped, "choir_replication_events_total", agent="agent-1")
            assert events == status.ack_rev
            assert value(scraped, "choir_replication_ack_revision", agent="agent-1") == events
            assert value(scraped, "choir_agent_up", agent="agent-1") == 1
            assert value(scraped, "choir_sessions", status="active") == 1
            assert value(scraped, "choir_approvals_pending") == 0
            assert value(scraped, "process_cpu_seconds_total") > 0

            # the model calls, as the usage report stored them in Postgres
            report = await operator.usage(by="model", kind="llm")  # a recall embeds too
            [demo] = report.rows
            llm = {"agent": "agent-1", "model": demo.key, "kind": "llm"}
            assert value(scraped, "choir_model_calls_total", **llm) == demo.calls >= 5
            tokens = {
                kind: scraped.get(
                    ("choir_model_tokens_total", frozenset({**llm, "type": kind}.items())), 0
                )
                for kind in ("prompt", "completion", "cached")
            }
            stored = (demo.prompt_tokens, demo.completion_tokens, demo.cached_tokens)
            assert tuple(tokens.values()) == stored
            assert tokens["prompt"] > 0
            assert demo.cost_usd is None  # the demo model has no price: unknown, not 0
            assert value(scraped, "choir_model_unknown_cost_calls_total", **llm) == demo.calls
            assert value(scraped, "choir_model_cost_usd_total", **llm) == 0
            timed = "choir_model_call_duration_seconds"
            assert value(scraped, f"{timed}_count", **llm) == demo.calls
            # edge's third step was scripted to answer after 500 ms
            assert value(scraped, f"{timed}_bucket", **llm, le="0.25") < demo.calls
            assert "python_info" in {name for name, _ in scraped}  # the platform collector
        finally:
            agent.terminate()
            await agent.wait()

    # the agent's own log: the wait and its release at INFO, each call's run at DEBUG only
    records = [json.loads(line) for line in (root / "agent.log").read_text().splitlines()]
    locks = [r for r in records if r["logger"] == "choir.agent.kernel.locks"]
    assert [(r["level"], r["message"], r["tool"], r["lane"]) for r in locks] == [
        ("INFO", "lock wait", "choir.fs.read", "edge"),
        ("INFO", "lock released", "choir.fs.read", "edge"),
    ]
    assert 1000 <= locks[0]["wait_ms"] <= HOLD_MS + 500
    assert locks[0]["locks"] == ["file:shared.txt:S"]
    assert all(r["message"] != "tool call finished" for r in records)
