"""choir's own cost per model call end to end, first reply after a start, and the stack's memory.

    python -m bench.step_e2e [--json] [--quick]

Everything real: `choird` in its own process on a fresh home (`choirctl init`: embedded
Postgres, the local global repo, agent-1) with the process runtime, so choir-agent is a host
subprocess; the bench drives it over the operator socket as choirctl does. The model is a
zero-latency `ScriptedModelServer` in this process (OpenAI-compatible, loopback HTTP) that
answers each user message with 30 tool calls, one per model call — `choir.fs.write` and
`choir.fs.read` of small files, alternately — then a reply.

- `step_e2e_overhead_ms`: from `chat.send` to the reply on the console DM, minus the time spent
  inside the model server's handler, per model call (31 per message; median over the rounds).
  What remains is choir's: choird's inbox and push, the agent's commits and their replication,
  prompt assembly, the LLM client's HTTP round trip, tool dispatch, locks and execution.
  `agent_cpu_ms_per_call` and `choird_cpu_ms_per_call` are the CPU time each process used over
  the rounds, per model call: the same cost, steadier on a busy machine. One unmeasured round
  runs first: what a process does once (a wire model's first use builds its validator, the
  first model call loads the HTTP client, the first compaction's archive loads choird's
  memory and embedder, waited for until it is stored and embedded and choird is idle) is not a
  step's cost.
- `first_reply_s`: from spawning `choird` (on an initialised home whose Postgres has stopped
  with it) to the first reply of a freshly started agent-1.
- `stack_rss_mb`: resident memory after the run of choird, everything it spawned (the agent and
  its sandbox) and every Postgres process; `choird_rss_mb`, `agent_rss_mb`, `postgres_rss_mb`
  split it. `stack_pss_mb` is the same set's proportional size: RSS counts each page of
  Postgres' shared memory once per process that touched it, PSS shares it out.
  `postgres_backends` is how many of choird's connections were open then (each a process of
  ~20 MB RSS): its pool closes one opened for overlapping queries after 10 s idle, so this
  figure, 2 or 3 right after the rounds, is most of `stack_rss_mb`'s spread.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psutil

from bench.common import compile_bytecode, parse_args, report

if TYPE_CHECKING:
    from aiohttp import web

    from choir.client import ChoirClient
    from choir.home import ChoirHome
    from choir.scripted import Script

GOALS = {
    "step_e2e_overhead_ms": "goal ≤ 2",
    "first_reply_s": "goal ≤ 0.8",
    "stack_rss_mb": "goal ≤ 150",
}
TOOL_CALLS = 30
"""Tool calls answering each user message, one per model call."""
FOLD = '{"memory_delta": {"mode": "append", "summary_update": "Files written and read."}}'
REPLY_TIMEOUT_S = 120.0
SETTLE_S = 30.0
MB = 1024 * 1024


def script(rounds: int) -> Script:
    """`hello` answered at once, then `[work-0]` (the unmeasured warm-up) and `rounds` user
    messages `[work-N]` of 30 tool calls each; compaction's fold requests (they may come at any
    time) get a delta."""
    from choir.scripted import ReplyStep, Script, ScriptedCall, Step, ToolCallsStep

    steps: list[Step] = [
        ReplyStep(match="Events to fold", repeat=True, text=FOLD),
        ReplyStep(match="hello", text="hi"),
    ]
    for n in range(rounds + 1):
        for call in range(TOOL_CALLS):
            path = f"round-{n}/file-{call // 2}.txt"
            if call % 2 == 0:
                arguments = {"path": path, "op": "overwrite", "content": f"line {call}\n"}
                tool = ScriptedCall(name="choir.fs.write", arguments=arguments)
            else:
                tool = ScriptedCall(name="choir.fs.read", arguments={"path": path})
            condition: dict[str, Any] = {"after": "tool"} if call else {"match": f"[work-{n}]"}
            steps.append(ToolCallsStep(calls=[tool], **condition))
        steps.append(ReplyStep(after="tool", text=f"done [work-{n}]"))
    return Script(steps=steps)


def timed_server(rounds: int) -> Any:
    """A zero-latency scripted model server that adds up the time its handler spends on the
    lanes' own calls (those offering tools; compaction's folds run beside the steps)."""
    from choir.scripted import ScriptedModelServer

    class TimedServer(ScriptedModelServer):
        spent_s = 0.0
        calls = 0

        async def _complete(self, http_request: web.Request) -> web.Response:
            began = time.perf_counter()
            try:
                return await super()._complete(http_request)
            finally:
                body = self.requests[-1].body if self.requests else None
                if isinstance(body, dict) and body.get("tools"):
                    self.spent_s += time.perf_counter() - began
                    self.calls += 1

    return TimedServer(script(rounds), zero_latency=True)


def prepare_home(root: Path, model_url: str, rounds: int = 5) -> ChoirHome:
    """`choirctl init`'s home, its model pointed at the scripted server. The session's budgets
    fit the rounds: each costs ~300k tokens (a prompt of up to ~9k tokens per model call), and
    at the default 2M a seventh round paused for a budget extension no one approved."""
    from choir.config import init_home
    from choir.home import ChoirHome

    home = ChoirHome(root / "h")
    init_home(home)
    data = json.loads(home.config_file.read_text())
    data["models"]["demo"] = {"provider": "scripted", "model": "bench", "endpoint": model_url}
    budgets = data.setdefault("budgets", {})
    budgets["total_session_tokens"] = (rounds + 2) * 500_000
    budgets["max_tool_calls_per_session"] = (rounds + 2) * TOOL_CALLS * 2
    home.config_file.write_text(json.dumps(data, indent=2))
    return home


@contextlib.asynccontextmanager
async def choird(home: ChoirHome) -> AsyncIterator[tuple[psutil.Process, ChoirClient]]:
    """`choird --runtime process` on `home` and an operator client, once its socket answers;
    stopped with SIGTERM (it stops its agents and Postgres) on exit."""
    from choir.client import ChoirClient
    from choir.errors import UnavailableError

    process = await asyncio.create_subprocess_exec(
        str(Path(sys.executable).with_name("choird")),
        "--home",
        str(home.root),
        "--runtime",
        "process",
        "--quiet",
        stdin=asyncio.subprocess.DEVNULL,
    )
    try:
        client = None
        async with asyncio.timeout(60):
            while client is None:
                if process.returncode is not None:
                    raise RuntimeError(f"choird exited ({process.returncode}): see its log")
                try:
                    client = await ChoirClient.connect(home, call_timeout=300)
                except UnavailableError:
                    await asyncio.sleep(0.005)
        async with client:
            yield psutil.Process(process.pid), client
    finally:
        if process.returncode is None:
            process.terminate()
        async with asyncio.timeout(60):
            await process.wait()


async def chat(client: ChoirClient, text: str) -> None:
    """Send `text` to agent-1 and wait for its reply."""
    sent = await client.chat_send("agent-1", text)
    replies = client.chat_replies("agent-1", after_seq=sent.after_seq)
    async with contextlib.aclosing(replies), asyncio.timeout(REPLY_TIMEOUT_S):
        async for reply in replies:
            if reply.in_reply_to != sent.message_id:
                continue
            if reply.category == "error":
                raise RuntimeError(f"agent-1 answered {text!r} with an error: {reply.text}")
            if reply.category == "reply":
                return
    raise RuntimeError(f"the reply stream ended before agent-1 answered {text!r}")


def agent_process(daemon: psutil.Process) -> psutil.Process:
    """choir-agent among choird's descendants: a sandbox (bwrap) may stand between them and
    name it too, so the largest of those naming it."""
    found = []
    for process in daemon.children(recursive=True):
        with contextlib.suppress(psutil.Error):
            if any("choir-agent" in part or "choir_agent" in part for part in process.cmdline()):
                found.append((process.memory_info().rss, process))
    if not found:
        raise RuntimeError("choird runs no choir-agent")
    return max(found, key=lambda item: item[0])[1]


async def settled(daemon: psutil.Process) -> None:
    """Wait (at most `SETTLE_S`) until choird is idle: the warm-up's first compaction loads
    its memory (the store, the embedder's model) in the background, which happens once and
    is not a step's cost."""
    before, deadline = cpu_s(daemon), time.monotonic() + SETTLE_S
    while time.monotonic() < deadline:
        await asyncio.sleep(0.25)
        now = cpu_s(daemon)
        if now - before < 0.01:
            return
        before = now


async def memory_loaded(client: ChoirClient) -> None:
    """Wait (at most `SETTLE_S`) until the warm-up's compaction archive is stored and embedded.
    It may land after the warm-up's reply: when choird went idle before it, `settled` returned
    at once and memory's start (the store, the embedder's model: ~0.3 s of CPU) fell into the
    first measured round, 2-3 ms more per model call than a steady choird costs."""
    deadline = time.monotonic() + SETTLE_S
    while time.monotonic() < deadline:
        stats = await client.memory_stats("agent-1")
        agent = stats.agents[0] if stats.agents else None
        embedded = agent is not None and agent.knowledge_items and not agent.vectors_missing
        if embedded and not stats.embedding.queue_depth:
            return
        await asyncio.sleep(0.05)


def cpu_s(process: psutil.Process) -> float:
    """CPU seconds (user + system) the process has used so far: unlike wall time, this barely
    moves with the machine's load."""
    times = process.cpu_times()
    return times.user + times.system


def rss_mb(processes: list[psutil.Process]) -> float:
    total = 0
    for process in processes:
        with contextlib.suppress(psutil.Error):
            total += process.memory_info().rss
    return total / MB


def pss_mb(processes: list[psutil.Process]) -> float:
    """Proportional set size: each shared page split among the processes sharing it, so the
    sum is what the stack costs the host (RSS counts Postgres' shared buffers once per backend)."""
    total = 0
    for process in processes:
        with contextlib.suppress(psutil.Error):
            total += process.memory_full_info().pss
    return total / MB


def breakdown(groups: dict[str, list[psutil.Process]]) -> list[str]:
    """One line per process: its group, RSS, PSS and what it is (a Postgres process's title
    names its role: `checkpointer`, or a backend's user, database and state)."""
    lines = []
    for group, processes in groups.items():
        for process in processes:
            with contextlib.suppress(psutil.Error):
                memory = process.memory_full_info()
                title = " ".join(process.cmdline())[:70]
                lines.append(
                    f"{group:9} {process.pid:>7} rss {memory.rss / MB:6.1f} pss "
                    f"{memory.pss / MB:6.1f}  {title}"
                )
    return lines


def is_backend(process: psutil.Process) -> bool:
    """A client connection's backend: its title names the client, `[local]` for choird's
    connections over the server's Unix socket (the server's own processes name their role)."""
    with contextlib.suppress(psutil.Error):
        return "[local]" in " ".join(process.cmdline())
    return False


def postgres_processes(home: ChoirHome) -> list[psutil.Process]:
    from choir.store.postgres.postmaster import postmaster_pid

    pid = postmaster_pid(home.pgdata)
    if pid is None:
        raise RuntimeError(f"no postmaster serves {home.pgdata}")
    postmaster = psutil.Process(pid)
    return [postmaster, *postmaster.children(recursive=True)]


@dataclass
class Run:
    first_reply_s: float
    overheads_ms: list[float]
    model_calls: int
    """The lanes' model calls over the rounds."""
    choird_cpu_ms: float
    agent_cpu_ms: float
    choird_mb: float
    agent_mb: float
    postgres_mb: float
    postgres_backends: int
    """choird's connections open when the memory was read."""
    stack_pss_mb: float
    processes: list[str]
    """`breakdown`'s lines, printed beside the figures."""


async def run(root: Path, rounds: int) -> Run:
    server = timed_server(rounds)
    async with server:
        home = prepare_home(root, server.url, rounds)
        async with choird(home):  # the first start creates Postgres' cluster: not measured
            pass
        began = time.perf_counter()
        async with choird(home) as (daemon, client):
            await client.agent_start("agent-1", {"dm": "console"})
            await chat(client, "hello")
            first_reply_s = time.perf_counter() - began
            await chat(client, "[work-0]")  # warm-up: first uses build models, load aiohttp
            await memory_loaded(client)
            await settled(daemon)
            agent = agent_process(daemon)
            cpu_before = cpu_s(daemon), cpu_s(agent)
            calls_before = server.calls
            overheads = []
            for n in range(1, rounds + 1):
                spent, calls = server.spent_s, server.calls
                began = time.perf_counter()
                await chat(client, f"[work-{n}]")
                wall = time.perf_counter() - began
                model_calls = server.calls - calls
                overheads.append((wall - (server.spent_s - spent)) / model_calls * 1000)
            calls = server.calls - calls_before
            spawned = daemon.children(recursive=True)
            postgres = postgres_processes(home)
            return Run(
                first_reply_s,
                overheads,
                calls,
                choird_cpu_ms=(cpu_s(daemon) - cpu_before[0]) / calls * 1000,
                agent_cpu_ms=(cpu_s(agent) - cpu_before[1]) / calls * 1000,
                choird_mb=rss_mb([daemon]),
                agent_mb=rss_mb(spawned),
                postgres_mb=rss_mb(postgres),
                postgres_backends=sum(map(is_backend, postgres)),
                stack_pss_mb=pss_mb([daemon, *spawned, *postgres]),
                processes=breakdown({"choird": [daemon], "spawned": spawned, "postgres": postgres}),
            )


async def measure(quick: bool) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="se-", dir="/tmp") as tmp:
        result = await run(Path(tmp), 1 if quick else 5)
    print("\n".join(result.processes), file=sys.stderr)
    return {
        "step_e2e_overhead_ms": statistics.median(result.overheads_ms),
        "first_reply_s": result.first_reply_s,
        "choird_cpu_ms_per_call": result.choird_cpu_ms,
        "agent_cpu_ms_per_call": result.agent_cpu_ms,
        "stack_rss_mb": result.choird_mb + result.agent_mb + result.postgres_mb,
        "choird_rss_mb": result.choird_mb,
        "agent_rss_mb": result.agent_mb,
        "postgres_rss_mb": result.postgres_mb,
        "postgres_backends": result.postgres_backends,
        "stack_pss_mb": result.stack_pss_mb,
    }


def main() -> None:
    args = parse_args(__doc__ or "")
    compile_bytecode()
    os.environ.pop("CHOIR_HOME", None)
    figures = asyncio.run(measure(args.quick))
    report("step end to end", figures, GOALS, args.json)


if __name__ == "__main__":
    main()
