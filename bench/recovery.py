"""Crash recovery time: SIGKILL of a running choir-agent to its lanes running again (goal ≤ 2 s).

choird runs in this process (embedded Postgres, a temporary home, its log in the home's
`logs/choird.log` as `choird` writes it — not on this console); the agent is the real
`choir-agent` process runtime. Before the first kill the user chats with the demo model, with a
snapshot every few events (§13.4), so every resume restores a snapshot and replays its tail.
Each round kills the agent, marks its session crashed (what choird's supervision does), starts
the session again — it resumes — launches a new agent, and stops the clock when the edge lane's
first REPORT_STATUS of the new process reaches the status board: INIT_HELLO answered, the
snapshot and tail restored, the lanes started.

    python -m bench.recovery [--json] [--quick]
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from bench.common import median, parse_args, report

if TYPE_CHECKING:
    from choir.client import ChoirClient
    from choir.home import ChoirHome

CHATS = 5
"""Messages before the first kill (three events each): a resume restores the snapshot taken
after the fourth and replays the fifth's events as its tail."""
SNAPSHOT_EVERY_EVENTS = 5
REPO = Path(__file__).resolve().parents[1]
SEEDS = REPO / "seeds" / "global"
CHOIR_AGENT = Path(sys.executable).parent / "choir-agent"


def choir_tree(root: Path) -> Path:
    tree = root / "choir"
    shutil.copytree(SEEDS / "tools", tree / "tools" / "global")
    (tree / "tools" / "agent").mkdir()
    shutil.copytree(SEEDS / "skills", tree / "skills")
    return tree


async def rounds(count: int) -> list[float]:
    from choir.logs import setup_logging, shutdown_logging

    with tempfile.TemporaryDirectory(prefix="br-", dir="/tmp") as tmp:
        root = Path(tmp)
        home = bench_home(root)
        setup_logging(home, "choird")  # choird's "session crashed" lines go to its log file
        try:
            return await _rounds(count, home, root)
        finally:
            shutdown_logging()


def bench_home(root: Path) -> ChoirHome:
    """A fresh home taking a snapshot every `SNAPSHOT_EVERY_EVENTS` events."""
    from choir.config import init_home
    from choir.home import ChoirHome

    home = ChoirHome(root / "h")
    init_home(home)
    data = json.loads(home.config_file.read_text())
    data["snapshot_every_events"] = SNAPSHOT_EVERY_EVENTS
    home.config_file.write_text(json.dumps(data, indent=2))
    return home


async def _rounds(count: int, home: ChoirHome, root: Path) -> list[float]:
    from choir.client import ChoirClient
    from choir.daemon.app import ChoirDaemon, DaemonOptions
    from choir.daemon.operator.api import operator_handler

    tree, workspace = choir_tree(root), root / "ws"
    workspace.mkdir()
    async with (
        ChoirDaemon(DaemonOptions(home), operator=operator_handler) as daemon,
        await ChoirClient.connect(home) as operator,
    ):
        services = daemon.services
        assert services is not None
        edge_up = asyncio.Event()
        services.status.subscribe(lambda _sid, lane: _notice(lane.report.lane, edge_up))

        async def launch() -> asyncio.subprocess.Process:
            started = await services.sessions.start("agent-1", {})
            socket = await daemon.open_agent_socket("agent-1")
            env = {
                "PATH": "/usr/bin:/bin",
                "CHOIR_AGENT_ID": "agent-1",
                "CHOIR_SESSION_ID": started.session_id,
                "CHOIR_LEASE_TOKEN": started.lease_token,
                "HOME": str(root / "agent-home"),
            }
            return await asyncio.create_subprocess_exec(
                str(CHOIR_AGENT),
                "--control-plane=uds",
                f"--socket={socket}",
                f"--root={tree}",
                f"--workspace={workspace}",
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )

        process = await launch()
        await asyncio.wait_for(edge_up.wait(), 30)
        for n in range(CHATS):
            await asyncio.wait_for(chat(operator, f"hello {n}"), 30)
        samples: list[float] = []
        for _ in range(count):
            session_id = (await services.sessions.recent("agent-1", 1))[0].session_id
            edge_up.clear()
            started = time.perf_counter()
            process.kill()
            await process.wait()
            await services.sessions.mark_crashed(session_id, "killed by the benchmark")
            process = await launch()
            await asyncio.wait_for(edge_up.wait(), 30)
            samples.append(time.perf_counter() - started)
        process.kill()
        await process.wait()
        return samples


async def chat(operator: ChoirClient, text: str) -> None:
    """Send `text` to agent-1 and wait for its reply."""
    sent = await operator.chat_send("agent-1", text)
    replies = operator.chat_replies("agent-1", after_seq=sent.after_seq)
    try:
        async for reply in replies:
            if reply.in_reply_to == sent.message_id:
                return
    finally:
        await replies.aclose()


def _notice(lane: str, edge_up: asyncio.Event) -> None:
    if lane == "edge":
        edge_up.set()


def main() -> None:
    args = parse_args(__doc__ or "")
    samples = asyncio.run(rounds(2 if args.quick else 5))
    report(
        "crash recovery",
        {"kill_to_resumed_s": median(samples)},
        {"kill_to_resumed_s": "≤ 2 s"},
        args.json,
    )


if __name__ == "__main__":
    main()
