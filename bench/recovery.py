"""Crash recovery time: SIGKILL of a running choir-agent to its lanes running again (goal ≤ 2 s).

choird runs in this process (embedded Postgres, a temporary home); the agent is the real
`choir-agent` process runtime. Each round kills the agent, marks its session crashed (what
choird's supervision does), starts the session again — it resumes — launches a new agent, and
stops the clock when the edge lane's first REPORT_STATUS of the new process reaches the status
board: INIT_HELLO answered, the log restored, the lanes started.

    python -m bench.recovery [--json] [--quick]
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import median, parse_args, report

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
    from choir.config import init_home
    from choir.daemon.app import ChoirDaemon, DaemonOptions
    from choir.daemon.operator_api import operator_handler
    from choir.home import ChoirHome

    with tempfile.TemporaryDirectory(prefix="br-", dir="/tmp") as tmp:
        root = Path(tmp)
        home = ChoirHome(root / "h")
        init_home(home)
        tree, workspace = choir_tree(root), root / "ws"
        workspace.mkdir()
        async with ChoirDaemon(DaemonOptions(home), operator=operator_handler) as daemon:
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
                    "HOME": str(Path(tmp) / "agent-home"),
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
